package enginebench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/benchmetrics"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/internal/memcycle"
	"github.com/gcompose/gcompose/internal/testimage"
)

// flatBytesPerCycle is how much the live heap may grow a cycle and still
// count as flat: a leak of one small record a cycle is over it.
const flatBytesPerCycle = 64

// BenchmarkLongRunning is issue 17's memory of a long-running gcompose:
// 1,000 cycles (GCOMPOSE_BENCH_LONG_CYCLES) of what a reconciler or
// `gcompose logs --follow` repeats, the live heap after a collection, the
// goroutines and the open files sampled every 100 (internal/memcycle; a
// reconciler's benchmark passes its own cycle). Each sub-benchmark logs
// whether its memory stayed flat.
//
//   - engine-plan, engine-refresh: Engine.Run of an app of 100 resources
//     already deployed, plan only and refresh, in process (memadapter,
//     file state store): the engine, planner and store alone.
//   - session-refresh: what a reconciler's cycle does with real adapters:
//     load the descriptor, open a project session (Docker client, protocol
//     client, state store), refresh 10 file resources through the served
//     file adapter, close it.
//   - logs-follow: the gcompose CLI running `logs --follow` against an
//     adapter whose state reports a new 4 KiB output tail on every call;
//     its live heap read from the runtime's GC trace (GODEBUG=gctrace=1).
func BenchmarkLongRunning(b *testing.B) {
	cycles := benchmetrics.Size("LONG_CYCLES", 1000)
	opts := memcycle.Options{Cycles: cycles, Every: max(1, cycles/10)}
	report := func(b *testing.B, rep *memcycle.Report, err error) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		rep.Metrics(b, "")
		verdict := "flat"
		if ferr := rep.Flat(flatBytesPerCycle); ferr != nil {
			verdict = ferr.Error()
		}
		b.Logf("%s: %s: %s", b.Name(), rep, verdict)
	}

	for _, mode := range []plan.Mode{plan.Deploy, plan.Refresh} {
		name := "engine-plan"
		if mode == plan.Refresh {
			name = "engine-refresh"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, err := state.NewFileStore(b.TempDir(), state.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			e := &engine.Engine{Adapters: memadapter.New(), Store: st, Parallelism: 10, Version: "bench", LockTimeout: time.Minute}
			want := memResources(100)
			if _, err := e.Run(ctx, engine.Request{App: "long", Mode: plan.Deploy, Desired: want}); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				rep, err := memcycle.Run(ctx, opts, func(ctx context.Context, _ int) error {
					out, err := e.Run(ctx, engine.Request{App: "long", Mode: mode, Desired: want, PlanOnly: true})
					if err == nil && out.Plan.HasChanges() {
						err = fmt.Errorf("plan has changes: %+v", out.Plan.Summary)
					}
					return err
				})
				report(b, rep, err)
			}
		})
	}

	b.Run("session-refresh", func(b *testing.B) {
		h := newHarness(b, 50*time.Minute)
		dir := b.TempDir()
		desc := filepath.Join(dir, "app.yaml")
		if err := os.WriteFile(desc, []byte(h.fileApp("long-session", 10)), 0o644); err != nil {
			b.Fatal(err)
		}
		stateDir := filepath.Join(dir, "state")
		// Once: testimage.Labels registers a cleanup with every call, which
		// would be the benchmark's own leak.
		labels := testimage.Labels(b)
		// One cycle: a reconciler's Opener and Run, then Close.
		run := func(ctx context.Context, mode plan.Mode, planOnly bool) error {
			p, diags := project.Load(ctx, project.LoadOptions{Files: []string{desc}})
			if diags.HasErrors() {
				return fmt.Errorf("load: %v", diags)
			}
			st, err := state.NewFileStore(stateDir, state.Options{})
			if err != nil {
				return err
			}
			sess, err := project.Open(ctx, project.Options{Project: p, Store: st, Version: "bench", CacheDir: h.cache,
				Labels: labels, Parallelism: 10, LockTimeout: time.Minute})
			if err != nil {
				st.Close()
				return err
			}
			res, err := sess.Run(ctx, project.Run{Mode: mode, PlanOnly: planOnly})
			if err == nil && planOnly && res.Outcome.Plan.HasChanges() {
				err = fmt.Errorf("refresh found changes: %+v", res.Outcome.Plan.Summary)
			}
			return errorsJoin(err, sess.Close())
		}
		if err := run(h.ctx, plan.Deploy, false); err != nil {
			b.Fatalf("deploy: %v", err)
		}
		defer func() {
			if err := run(h.ctx, plan.Destroy, false); err != nil {
				b.Errorf("destroy: %v", err)
			}
		}()
		for range b.N {
			rep, err := memcycle.Run(h.ctx, opts, func(ctx context.Context, _ int) error { return run(ctx, plan.Refresh, true) })
			report(b, rep, err)
		}
	})

	b.Run("logs-follow", func(b *testing.B) {
		for range b.N {
			logsFollow(b, cycles)
		}
	})
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// memResources are n independent in-memory resources.
func memResources(n int) map[string]*plan.Resource {
	out := make(map[string]*plan.Resource, n)
	for i := range n {
		name := fmt.Sprintf("resources.r%04d", i)
		out[name] = &plan.Resource{Name: name, Type: "mem", Config: map[string]any{"value": i}}
	}
	return out
}

// fileApp is a descriptor of n file resources of the harness's image in
// the plug ./out.
func (h *harness) fileApp(app string, n int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "meta:\n  name: %s\nplugs:\n  files:\n    path: ./out\nresources:\n", app)
	for i := range n {
		fmt.Fprintf(&sb, "  f%02d:\n    type: %s\n    config:\n      path: f%02d.txt\n      content: \"%d\\n\"\n", i, h.image, i, i)
	}
	return sb.String()
}

// pollLogsName names the image of testdata/polllogs, an adapter whose
// state reports a new output tail on every call.
const pollLogsName = "gcompose-test/polllogs:enginebench"

// gctraceLine is the runtime's line after each collection: "gc N @Ts P%:
// ..., A->B->C MB, ..."; C is the live heap after marking.
var gctraceLine = regexp.MustCompile(`^gc \d+ @[\d.]+s .*, (\d+)->(\d+)->(\d+) MB`)

// logsFollow deploys one polllogs resource with the CLI, follows its logs
// for cycles polls (one state call each, 1 ms apart), and reads the CLI's
// live heap from its GC trace: at the end of the first tenth of the
// cycles, and at the end.
func logsFollow(b *testing.B, cycles int) {
	h := newHarness(b, 50*time.Minute)
	pollLogsImage := testimage.Image(b, h.ctx, "./core/engine/enginebench/testdata/polllogs", pollLogsName)
	bin := testimage.Binary(b, h.ctx, "./cmd/gcompose")
	dir := b.TempDir()
	desc := filepath.Join(dir, "app.yaml")
	body := fmt.Sprintf("meta:\n  name: long-logs\nresources:\n  tail:\n    type: %s\n    config:\n      bytes: 4096\n", pollLogsImage)
	if err := os.WriteFile(desc, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	cli := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(h.ctx, bin, append(args, "-f", desc, "--state", filepath.Join(dir, "state"))...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
		return cmd
	}
	if out, err := cli("deploy", "--yes").CombinedOutput(); err != nil {
		b.Fatalf("deploy: %v\n%s", err, out)
	}
	defer func() {
		if out, err := cli("destroy", "--yes").CombinedOutput(); err != nil {
			b.Errorf("destroy: %v\n%s", err, out)
		}
	}()

	follow := cli("logs", "--follow", "--interval", "1ms")
	follow.Env = append(follow.Env, "GODEBUG=gctrace=1")
	stdout, err := follow.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	stderr, err := follow.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := follow.Start(); err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	polls := 0
	var live []int // live heap (MB) after each collection
	var liveAt []int
	var other []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			if m := gctraceLine.FindStringSubmatch(sc.Text()); m != nil {
				mb, _ := strconv.Atoi(m[3])
				live, liveAt = append(live, mb), append(liveAt, polls)
			} else if len(other) < 20 {
				other = append(other, sc.Text())
			}
			mu.Unlock()
		}
	}()
	rssAt := map[int]int{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "==> resources.tail poll") {
			continue
		}
		mu.Lock()
		polls++
		n := polls
		mu.Unlock()
		if n == cycles/10 || n == cycles {
			rssAt[n] = rssKiB(follow.Process.Pid)
		}
		if n >= cycles {
			break
		}
	}
	elapsed := time.Since(start)
	_ = follow.Process.Signal(syscall.SIGINT)
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(devNull{}) }()
	werr := follow.Wait()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if polls < cycles {
		b.Fatalf("logs --follow printed %d polls, want %d (exit %v); stderr: %s", polls, cycles, werr, strings.Join(other, "\n"))
	}
	// The live heap after the collections of the first tenth, and of the
	// last tenth.
	early, late := -1, -1
	for i, at := range liveAt {
		if at <= cycles/10 {
			early = live[i]
		}
		if at >= cycles*9/10 && late < 0 {
			late = live[i]
		}
	}
	if late < 0 && len(live) > 0 {
		late = live[len(live)-1]
	}
	b.ReportMetric(float64(len(live)), "collections")
	b.ReportMetric(float64(early), "live-MB-at-10%")
	b.ReportMetric(float64(late), "live-MB-at-90%")
	b.ReportMetric(float64(rssAt[cycles]-rssAt[cycles/10])/1024, "rss-growth-MiB")
	verdict := "flat"
	if late > early {
		verdict = fmt.Sprintf("not flat: the live heap grew from %d MB to %d MB", early, late)
	}
	b.Logf("%s: %d polls of a 4 KiB tail in %s (%.2f ms each); %d collections; live heap %d MB after %d polls, %d MB after %d (trace: %v at polls %v); RSS %d KiB -> %d KiB: %s",
		b.Name(), polls, elapsed.Round(time.Millisecond), float64(elapsed.Microseconds())/1000/float64(polls), len(live), early, cycles/10, late, cycles*9/10,
		live, liveAt, rssAt[cycles/10], rssAt[cycles], verdict)
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }

// rssKiB is a process's resident set (VmRSS), -1 if unknown.
func rssKiB(pid int) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}
