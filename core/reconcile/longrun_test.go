package reconcile_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/reconcile"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/benchmetrics"
	"github.com/gcompose/gcompose/internal/memcycle"
	"github.com/gcompose/gcompose/internal/testimage"
)

// flatBytesPerCycle is how much the live heap may grow a cycle and still
// count as flat (core/engine/enginebench's bound): a leak of one small
// record a cycle is over it.
const flatBytesPerCycle = 64

// BenchmarkLongRunningReconciler is issue 17's memory of a long-running
// reconciler, measured on the real one: Reconciler.Cycle, 1,000 times
// (GCOMPOSE_BENCH_LONG_CYCLES) after 100 of warm-up, through
// internal/memcycle, which samples the live heap after a collection, the
// goroutines and the open files every 100 cycles.
//
// The reconciler is wired as `gcompose reconcile --state DIR --listen`
// wires it: one file state store open for its whole life (the CLI's
// default backend; its journal and lock files are open files a leak would
// show, which the in-memory store has none of), and every cycle loads the
// descriptor afresh and opens a core/project session (Docker client,
// protocol client with its init cache on disk, the run's redactor, a state
// key) that refreshes, and repairs, through the served file adapter in
// real containers. After every cycle /metrics and /healthz are fetched
// over HTTP from the reconciler's handler on a loopback port, and checked
// against what the cycle did.
//
// The application is 10 files, one reading another's checksum (a knock-on
// to repair) and one holding a ${secret.*} (encrypted in the state,
// decrypted and learnt by the redactor every cycle).
//
//   - healthy: nothing drifts; every cycle must be Healthy.
//   - drift-every-10: before every 10th cycle one file (the next in turn)
//     is deleted behind the reconciler's back; that cycle must repair it
//     (Repaired, the file back), the others be Healthy.
//
// Each sub-benchmark logs whether its memory stayed flat, and fails when
// goroutines or open files were left behind, or, at 1,000 cycles or more,
// when the live heap grew more than flatBytesPerCycle a cycle.
func BenchmarkLongRunningReconciler(b *testing.B) {
	cycles := benchmetrics.Size("LONG_CYCLES", 1000)
	for _, shape := range []struct {
		name       string
		driftEvery int
	}{{"healthy", 0}, {"drift-every-10", 10}} {
		b.Run(shape.name, func(b *testing.B) {
			for range b.N {
				longRun(b, cycles, shape.driftEvery)
			}
		})
	}
}

// longRunFiles is how many files the benchmark's application has.
const longRunFiles = 10

// longRunApp is the descriptor: files f00..f09 of image in the plug ./out;
// f01 reads f00's checksum, f02 holds the secret token.
func longRunApp(app, image string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "meta:\n  name: %s\nsecrets:\n  token: {file: ./token}\nplugs:\n  files:\n    path: ./out\nresources:\n", app)
	for i := range longRunFiles {
		content := fmt.Sprintf("%d\\n", i)
		switch i {
		case 1:
			content = "f00 is ${resources.f00.state.sha256}\\n"
		case 2:
			content = "token ${secret.token}\\n"
		}
		fmt.Fprintf(&sb, "  f%02d:\n    type: %s\n    config:\n      path: f%02d.txt\n      content: \"%s\"\n", i, image, i, content)
	}
	return sb.String()
}

func longRun(b *testing.B, cycles, driftEvery int) {
	testimage.RequireDocker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	defer cancel()
	image := testimage.Image(b, ctx, "./cmd/file-adapter", "gcompose-test/file-adapter:reconcilebench")
	// Once: testimage.Labels registers a cleanup with every call, which
	// would be the benchmark's own leak.
	labels := testimage.Labels(b)

	// The state key (the secret is encrypted in the state), and a name of
	// the run's own: a run's leftover cleanup removes the containers of its
	// application that earlier runs left, which a run of the same
	// benchmark from another checkout, at the same time, would be.
	key, id := make([]byte, 32), make([]byte, 4)
	if _, err := rand.Read(key); err != nil {
		b.Fatal(err)
	}
	if _, err := rand.Read(id); err != nil {
		b.Fatal(err)
	}
	app := "long-reconcile-" + hex.EncodeToString(id)
	dir := b.TempDir()
	desc := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(longRunApp(app, image)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cr3t-reconcile-bench\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	out, cache := filepath.Join(dir, "out"), filepath.Join(dir, "cache")
	st, err := state.NewFileStore(filepath.Join(dir, "state"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	red := secret.NewRedactor()
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The CLI's observer logs the actions of a repair; the state reads of
	// every refresh it skips.
	observe := func(ev apply.Event) {
		switch ev.Phase {
		case apply.PhaseState, apply.PhaseWait, apply.PhaseVerify:
			return
		}
		log.Info(ev.Message, "phase", string(ev.Phase), "resource", ev.Resource)
	}
	// open is the CLI's Opener: the descriptor loaded afresh, a session on
	// the store that stays open.
	open := func(ctx context.Context) (reconcile.Session, error) {
		p, diags := project.Load(ctx, project.LoadOptions{Files: []string{desc}, Redactor: red})
		if diags.HasErrors() || p == nil {
			return nil, fmt.Errorf("loading %s: %v", desc, diags)
		}
		desired, err := p.Desired()
		if err != nil {
			return nil, err
		}
		codec, err := secret.NewKeyCodec(key)
		if err != nil {
			return nil, err
		}
		sess, err := project.Open(ctx, project.Options{Project: p, Store: project.KeepOpen{Store: st}, Codec: codec, Redactor: red,
			Version: "bench", CacheDir: cache, Labels: labels, Parallelism: 10, LockTimeout: time.Minute,
			Info: func(string) {}, Warn: func(msg string) { log.Warn(msg) }})
		if err != nil {
			return nil, err
		}
		return project.ReconcileSession(sess, &reconcile.Intent{App: app, Desired: desired, Outputs: p.Outputs()}, observe), nil
	}
	runOnce := func(mode plan.Mode) error {
		s, err := open(ctx)
		if err != nil {
			return err
		}
		_, err = s.Run(ctx, engine.Request{App: app, Mode: mode})
		return errors.Join(err, s.Close())
	}
	if err := runOnce(plan.Deploy); err != nil {
		b.Fatalf("deploy: %v", err)
	}
	defer func() {
		if err := runOnce(plan.Destroy); err != nil {
			b.Errorf("destroy: %v", err)
		}
	}()

	repaired := 0
	r, err := reconcile.New(reconcile.Config{App: app, Open: open, Redactor: red, Log: log,
		Backoff: reconcile.Backoff{Interval: time.Second, Jitter: 0.1},
		Events: func(ev reconcile.Event) {
			if ev.Phase == reconcile.PhaseRepaired {
				repaired++
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	srv := serve(b, r.Handler())
	scraper := newScraper(srv)
	defer scraper.close()

	counts := map[reconcile.Outcome]int{}
	opts := memcycle.Options{Cycles: cycles, Every: max(1, cycles/10)}
	drifts := 0
	loadBefore := benchmetrics.LoadAvg()
	rep, err := memcycle.Run(ctx, opts, func(ctx context.Context, i int) error {
		want, victim := reconcile.Healthy, ""
		if driftEvery > 0 && i%driftEvery == driftEvery-1 {
			victim = fmt.Sprintf("f%02d", drifts%longRunFiles)
			drifts++
			if err := os.Remove(filepath.Join(out, victim+".txt")); err != nil {
				return err
			}
			want = reconcile.Repaired
		}
		// A bound of its own: a Docker Engine that stops answering (seen
		// once here: a container start never answered) fails the cycle
		// rather than holding the benchmark until its timeout.
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		res := r.Cycle(cctx, cctx)
		counts[res.Outcome]++
		if res.Outcome != want {
			return fmt.Errorf("outcome %s, want %s (drifted %v, changes %v): %v", res.Outcome, want, res.Drifted, res.Changes, res.Err)
		}
		if victim != "" {
			if !slices.ContainsFunc(res.Changes, func(c string) bool { return strings.HasSuffix(c, " resources."+victim) }) {
				return fmt.Errorf("repair of %s changed %v", victim, res.Changes)
			}
			if _, err := os.Stat(filepath.Join(out, victim+".txt")); err != nil {
				return fmt.Errorf("after the repair: %w", err)
			}
		}
		return scraper.check(ctx, res.Outcome, counts)
	})
	if err != nil {
		b.Fatal(err)
	}
	if drifts > 0 && repaired != drifts {
		b.Fatalf("%d files deleted, %d repaired events", drifts, repaired)
	}
	rep.Metrics(b, "")
	verdict := "flat"
	if ferr := rep.Flat(flatBytesPerCycle); ferr != nil {
		verdict = ferr.Error()
	}
	b.Logf("%s: %s; %d repairs, %d scrapes of /metrics and /healthz; load %.1f -> %.1f: %s (live heap %s)",
		b.Name(), rep, drifts, scraper.scrapes, loadBefore, benchmetrics.LoadAvg(), verdict, rep.HeapSeries())
	// Goroutines and files left behind are a leak at any size; the heap's
	// slope is only read at the full size: over a few cycles the settling
	// of caches and pools looks like growth.
	if f, l := rep.First(), rep.Last(); l.Goroutines > f.Goroutines || l.FDs > f.FDs {
		b.Errorf("left behind: goroutines %d -> %d, open files %d -> %d", f.Goroutines, l.Goroutines, f.FDs, l.FDs)
	} else if cycles >= 1000 && verdict != "flat" {
		b.Error(verdict)
	}
}

// serve serves h on a loopback port, as `gcompose reconcile --listen`
// does, until the benchmark ends; it returns the base URL.
func serve(b *testing.B, h http.Handler) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// scraper fetches /metrics and /healthz as a Prometheus server and a
// liveness probe would: one client, its connections kept alive.
type scraper struct {
	base    string
	client  *http.Client
	scrapes int
}

func newScraper(base string) *scraper {
	return &scraper{base: base, client: &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}}
}

func (s *scraper) close() { s.client.CloseIdleConnections() }

// cyclesLine is a gcompose_reconcile_cycles_total series of the text format.
var cyclesLine = regexp.MustCompile(`(?m)^gcompose_reconcile_cycles_total\{[^}]*outcome="([a-z]+)"[^}]*\} (\d+)$`)

// check fetches both and checks that they show the cycle just run: its
// outcome on /healthz, the counts of every outcome on /metrics.
func (s *scraper) check(ctx context.Context, last reconcile.Outcome, counts map[reconcile.Outcome]int) error {
	s.scrapes++
	body, err := s.get(ctx, "/healthz")
	if err != nil {
		return err
	}
	var st reconcile.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("/healthz: %w: %s", err, body)
	}
	if !st.OK || st.LastOutcome != last {
		return fmt.Errorf("/healthz says ok %v, last outcome %s; the cycle was %s: %s", st.OK, st.LastOutcome, last, body)
	}
	body, err = s.get(ctx, "/metrics")
	if err != nil {
		return err
	}
	seen := 0
	for _, m := range cyclesLine.FindAllSubmatch(body, -1) {
		n, _ := strconv.Atoi(string(m[2]))
		if want := counts[reconcile.Outcome(m[1])]; n != want {
			return fmt.Errorf("/metrics: %d %s cycles, %d run", n, m[1], want)
		}
		seen++
	}
	if seen == 0 {
		return fmt.Errorf("/metrics has no gcompose_reconcile_cycles_total: %.500s", body)
	}
	return nil
}

func (s *scraper) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return body, nil
}
