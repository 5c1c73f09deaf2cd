package devnet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/devnet/devnettest"
	"github.com/gcompose/gcompose/internal/benchmetrics"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// BenchmarkGolemDeploy (issue 17): the gcompose CLI deploys, re-deploys
// (nothing to change) and destroys an app of 1, 10 and 30 services on one
// VPN, against the devnet over HTTP with the adapter images of this tree,
// all services at once (--parallelism 64). The ideal of a deploy is what
// one service alone costs: its create action (negotiation, VPN join,
// activity, deploy, start, init) in the 1-service deploy, as if every
// service rented in parallel at no extra cost; a destroy's is that
// service's delete. Each run's JSON event stream says where the time went:
// the network and payments creates that come first, and per service the
// negotiation (action start to agreement approved), the VPN join, the
// activity and the deploy with its init. GCOMPOSE_BENCH_GOLEM_SIZES
// changes the sizes (e.g. "1,3").
func BenchmarkGolemDeploy(b *testing.B) {
	sizes := []int{1, 10, 30}
	if v := os.Getenv("GCOMPOSE_BENCH_GOLEM_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("GCOMPOSE_BENCH_GOLEM_SIZES=%q: want sizes such as 1,10,30", v)
			}
			sizes = append(sizes, n)
		}
	}
	most := slices.Max(sizes)
	g := startGolemBench(b, []devnet.ProviderConfig{
		{Name: "bench", Count: most + 2, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.0001, 0.0002, 0}},
	})
	// A plan of an app never deployed keeps the market watcher registered
	// for the whole benchmark (each destroy releases its own app only), so
	// every deploy reads a warm offer book, as a user's next deploy does.
	watch := filepath.Join(g.dir, "bench-watch.yaml")
	if err := os.WriteFile(watch, []byte(golemApp("bench-watch", 1)), 0o644); err != nil {
		b.Fatal(err)
	}
	g.plan("bench-watch", watch)
	// Warm: the init cache on disk, the images' first start.
	g.cycle("warm", 1)

	load0 := benchmetrics.LoadAvg()
	results := map[int][3]*golemRun{}
	b.ResetTimer()
	for range b.N {
		for _, n := range sizes {
			deploy, redeploy, destroy := g.cycle(fmt.Sprintf("bench-%d", n), n)
			results[n] = [3]*golemRun{deploy, redeploy, destroy}
		}
	}
	b.StopTimer()
	load1 := benchmetrics.LoadAvg()

	ideal := map[string]time.Duration{}
	if one, ok := results[1]; ok {
		ideal["deploy"] = one[0].services.slowest
		ideal["re-deploy"] = one[1].wall
		ideal["destroy"] = one[2].services.slowest
	}
	// Printed, not logged: go test keeps only 10 lines of a benchmark's log.
	show := func(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }
	show("%s: Golem on the devnet, apps of %v services on one VPN, parallelism 64, load %.2f -> %.2f", b.Name(), sizes, load0, load1)
	for _, n := range sizes {
		for i, op := range []string{"deploy", "re-deploy", "destroy"} {
			r := results[n][i]
			ratio := math.NaN()
			if d := ideal[op]; d > 0 {
				ratio = r.wall.Seconds() / d.Seconds()
			}
			b.ReportMetric(r.wall.Seconds(), fmt.Sprintf("%s-%d-s", op, n))
			b.ReportMetric(ratio, fmt.Sprintf("%s-%d/ideal", op, n))
			show("  %-9s %2d services: %6.2f s, %5.2fx the ideal (%s); %s", op, n, r.wall.Seconds(), ratio, ms(ideal[op]), r)
			if op == "deploy" && r.rentals != nil {
				show("    %s", r.rentals)
			}
		}
	}
	// Issue 25's measure: a deploy of n at the pace of its slowest rental,
	// the whole deploy and its services' phase (first service action to
	// last done) against the 1-service deploy and its one create.
	if one, ok := results[1]; ok {
		for _, n := range sizes {
			if n == 1 {
				continue
			}
			d := results[n][0]
			whole := d.wall.Seconds() / one[0].wall.Seconds()
			phase := (d.servicesTo - d.servicesFrom).Seconds() / one[0].services.slowest.Seconds()
			b.ReportMetric(whole, fmt.Sprintf("deploy-%d/deploy-1", n))
			b.ReportMetric(phase, fmt.Sprintf("services-%d/create-1", n))
			show("  deploy of %d ÷ deploy of 1: %.2f; its services' phase (%s) ÷ one create (%s): %.2f", n, whole, ms(d.servicesTo-d.servicesFrom), ms(one[0].services.slowest), phase)
		}
	}
	b.ReportMetric(load0, "load-before")
	b.ReportMetric(load1, "load-after")
}

// golemBench is one devnet, the adapter images and the CLI (the benchmark's and TestSizeSweep's).
type golemBench struct {
	b      testing.TB
	ctx    context.Context
	url    string
	bin    string
	dir    string
	docker *client.Client
	images map[string]string
	srv    *devnet.Server
}

func startGolemBench(b testing.TB, providers []devnet.ProviderConfig) *golemBench {
	b.Helper()
	testimage.RequireDocker(b)
	ctx := ctxT(b, 170*time.Minute) // a size sweep waits for the heavy lock between its cycles
	docker := testimage.Client(b)
	buildProviderImage(b, docker)
	g := &golemBench{b: b, ctx: ctx, dir: b.TempDir(), docker: docker, images: map[string]string{}}
	for _, name := range []string{"network", "service", "payments", "proxy"} {
		g.images[name] = testimage.Image(b, ctx, "./cmd/golem-"+name, "gcompose-test/golem-"+name+":bench")
	}
	g.bin = testimage.Binary(b, ctx, "./cmd/gcompose")

	// The devnet logs at info level into a buffer shown only on failure
	// (its debug lines would drown the figures); no OpenAPI checker on the
	// measured path (the tests check every exchange).
	instance := "bench-" + strings.ToLower(unsafeChars.ReplaceAllString(b.Name(), "-"))
	logs := &syncwriter.Buffer{}
	cfg := devnet.Config{Instance: instance, Labels: testimage.Labels(b), Providers: providers}
	srv, err := devnet.New(ctx, devnet.Options{Config: cfg, AppKey: testKey, Docker: docker, Logger: slog.New(slog.NewTextHandler(logs, nil)), Init: devnettest.Init(b)})
	if err != nil {
		b.Fatalf("devnet.New: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	g.url, g.srv = hs.URL, srv
	b.Cleanup(func() {
		g.removeWatcher()
		if b.Failed() {
			b.Logf("devnet log:\n%s", tail(logs.String(), 8000))
		}
		hs.CloseClientConnections()
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			b.Errorf("devnet Close: %v", err)
		}
		f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance))
		if cs, err := docker.ContainerList(cctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) != 0 {
			b.Errorf("after Close: %d devnet containers left (err %v)", len(cs), err)
		}
	})
	return g
}

// cycle deploys an app of n services, deploys it again and destroys it.
func (g *golemBench) cycle(app string, n int) (deploy, redeploy, destroy *golemRun) {
	g.b.Helper()
	desc := filepath.Join(g.dir, app+".yaml")
	if err := os.WriteFile(desc, []byte(golemApp(app, n)), 0o644); err != nil {
		g.b.Fatal(err)
	}
	g.b.Cleanup(func() { g.removeApp(app) })
	deploy = g.run(app, "deploy", desc)
	if deploy.changed != n+2 {
		g.b.Fatalf("deploy of %s changed %d resources, want %d (the services, the network, the payments)", app, deploy.changed, n+2)
	}
	redeploy = g.run(app, "deploy", desc)
	if redeploy.changed != 0 {
		g.b.Fatalf("re-deploy of %s changed %d resources, want none", app, redeploy.changed)
	}
	destroy = g.run(app, "destroy", desc)
	if destroy.changed != n+2 {
		g.b.Fatalf("destroy of %s changed %d resources, want %d", app, destroy.changed, n+2)
	}
	return deploy, redeploy, destroy
}

// golemApp is an app of n services on one VPN, each the devnet's db image
// started by one init command.
func golemApp(app string, n int) string { return golemAppOn(app, n, 4001) }

// golemAppOn is golemApp with its services' db listening on port.
func golemAppOn(app string, n, port int) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `meta:
  name: %q
payloads:
  db:
    runtime: vm
    capabilities: [vpn]
    params:
      image_hash: %q
networks:
  default:
    ip: "192.168.80.0/24"
services:
`, app, testHash)
	for i := range n {
		fmt.Fprintf(&sb, `  s%02d:
    payload: db
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "/devnet-db -listen :%d > /tmp/db.out 2> /tmp/db.err &"]
`, i, port)
	}
	return sb.String()
}

// run runs one gcompose command with --json and reads its event stream.
func (g *golemBench) run(app, command, desc string) *golemRun {
	g.b.Helper()
	g.settle(app)
	args := []string{command, "-f", desc, "--app", app, "--state", filepath.Join(g.dir, "state"), "--yes", "--json", "--parallelism", "64",
		"--network-image", g.images["network"], "--service-image", g.images["service"],
		"--payments-image", g.images["payments"], "--proxy-image", g.images["proxy"]}
	cmd := exec.CommandContext(g.ctx, g.bin, args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "YAGNA_API_URL="+g.url, "GOLEM_REGISTRY_URL="+g.url, "YAGNA_APPKEY="+testKey, "XDG_CACHE_HOME="+filepath.Join(g.dir, "cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		g.b.Fatalf("gcompose %s %s: %v\n%s\n%s", command, app, err, tail(stdout.String(), 4000), tail(stderr.String(), 8000))
	}
	r, perr := readRun(start, wall, stderr.Bytes(), command == "deploy")
	if perr != nil {
		g.b.Fatalf("gcompose %s %s: %v\n%s", command, app, perr, tail(stderr.String(), 8000))
	}
	if command == "deploy" && len(r.activityOf) > 0 {
		r.rentals = rentalsOf(r, g.srv.ActivityTraces())
	}
	return r
}

// settle waits until the adapter containers of the previous run are gone,
// so that the next run's start-up cleanup does not meet one being removed.
func (g *golemBench) settle(app string) {
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+app), filters.Arg("label", "gcompose.managed"))
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cs, err := g.docker.ContainerList(g.ctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) == 0 {
			return
		}
	}
}

// removeApp removes what a failed run left of the app.
// removeWatcher removes the market watcher of the bench's devnet and waits
// until it is gone (a cold offer book next).
func (g *golemBench) removeWatcher() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "gcompose.offer-watcher=true"), filters.Arg("label", "gcompose.yagna-url="+g.url))
	for {
		cs, err := g.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil || len(cs) == 0 {
			return
		}
		for _, c := range cs {
			_ = g.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (g *golemBench) removeApp(app string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+app))
	cs, _ := g.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = g.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

// golemRun is where one command's time went, from its event stream.
type golemRun struct {
	wall    time.Duration
	changed int
	// firstEvent is when the stream's first event came (start-up: the
	// lock, the check and sweep calls, the planning state calls);
	// servicesFrom and servicesTo bound the services' actions; end is the
	// last event (then compaction, the adapter servers stopped, exit).
	firstEvent, servicesFrom, servicesTo, end time.Duration
	network, payments                         time.Duration // their actions
	services                                  spread        // each service's actions
	// Per service, from its action's start: the agreement approved
	// (negotiation), the VPN joined, the activity created.
	negotiated, joined, activity spread
	// allocated is when the payments' allocation was recorded, from their
	// action's start (its one-shot adapter container and the allocation);
	// the rest of their action starts the keeper.
	allocated time.Duration
	// activityOf is each service's activity (its create's output), doneAt
	// when its create was done; rentals what the devnet traced of them.
	activityOf map[string]string
	doneAt     map[string]time.Time
	rentals    *rentals
}

// rentals is where a deploy's creates spent their time once their activity
// existed, from the devnet's traces (devnet.ActivityTrace): the requestor's
// share (from the activity's creation to its first ExeScript batch, between
// batches, from the last batch's end until the create is done) and the
// devnet's (its batches: the commands, and in them the engine calls).
type rentals struct {
	afterActivity                          spread // activity created → create done
	toFirst, between, afterLast, requestor spread // the requestor's
	devnet, queued, deploy, start, run     spread // the devnet's: its batches, the wait before their first command, the commands
	steps                                  []stepStat
}

// stepStat is one kind of a devnet command's steps (an engine call, a wait) over a deploy.
type stepStat struct {
	name  string
	total time.Duration
	each  spread
}

// rentalsOf reads the devnet's traces of the activities of r's services.
func rentalsOf(r *golemRun, traces []devnet.ActivityTrace) *rentals {
	byID := map[string]devnet.ActivityTrace{}
	for _, t := range traces {
		byID[t.ID] = t
	}
	var after, toFirst, between, afterLast, requestor, dev, queued []time.Duration
	commands := map[string][]time.Duration{}
	steps := map[string][]time.Duration{}
	for service, id := range r.activityOf {
		t, ok := byID[id]
		done, finished := r.doneAt[service]
		if !ok || !finished || len(t.Batches) == 0 {
			continue
		}
		bs := t.Batches
		slices.SortFunc(bs, func(a, b devnet.BatchTrace) int { return a.Posted.Compare(b.Posted) })
		last := bs[len(bs)-1].Finished()
		if last.IsZero() {
			continue
		}
		var gap, own time.Duration
		for i, b := range bs {
			if i > 0 {
				gap += b.Posted.Sub(bs[i-1].Finished())
			}
			own += b.Finished().Sub(b.Posted)
			if len(b.Commands) > 0 {
				queued = append(queued, b.Commands[0].Start.Sub(b.Posted))
			}
			for _, c := range b.Commands {
				commands[c.Name] = append(commands[c.Name], c.End.Sub(c.Start))
				for _, st := range c.Steps {
					steps[st.Name] = append(steps[st.Name], st.Took)
				}
			}
		}
		first, tail := bs[0].Posted.Sub(t.Created), done.Sub(last)
		after = append(after, done.Sub(t.Created))
		toFirst, between, afterLast = append(toFirst, first), append(between, gap), append(afterLast, tail)
		requestor, dev = append(requestor, first+gap+tail), append(dev, own)
	}
	rs := &rentals{afterActivity: spreadOf(after), toFirst: spreadOf(toFirst), between: spreadOf(between), afterLast: spreadOf(afterLast),
		requestor: spreadOf(requestor), devnet: spreadOf(dev), queued: spreadOf(queued),
		deploy: spreadOf(commands["deploy"]), start: spreadOf(commands["start"]), run: spreadOf(commands["run"])}
	for name, ds := range steps {
		var total time.Duration
		for _, d := range ds {
			total += d
		}
		rs.steps = append(rs.steps, stepStat{name: name, total: total, each: spreadOf(ds)})
	}
	slices.SortFunc(rs.steps, func(a, b stepStat) int { return int(b.total - a.total) })
	return rs
}

func (rs *rentals) String() string {
	s := fmt.Sprintf("after the activity, each create %s: the requestor %s (to the first batch %s, between batches %s, after the last %s), "+
		"the devnet's batches %s (queued %s; deploy %s, start %s, init run %s)",
		rs.afterActivity, rs.requestor, rs.toFirst, rs.between, rs.afterLast, rs.devnet, rs.queued, rs.deploy, rs.start, rs.run)
	var calls []string
	for _, st := range rs.steps {
		calls = append(calls, fmt.Sprintf("%s %d× %s (total %s)", st.name, st.each.n, st.each, ms(st.total)))
	}
	return s + "\n          the devnet's engine calls and waits in those commands (fastest/median/slowest): " + strings.Join(calls, ", ")
}

// spread summarizes one duration over the services.
type spread struct {
	n                        int
	fastest, median, slowest time.Duration
}

func spreadOf(ds []time.Duration) spread {
	if len(ds) == 0 {
		return spread{}
	}
	slices.Sort(ds)
	return spread{n: len(ds), fastest: ds[0], median: ds[len(ds)/2], slowest: ds[len(ds)-1]}
}

func (s spread) String() string {
	if s.n == 0 {
		return "-"
	}
	return fmt.Sprintf("%s/%s/%s", ms(s.fastest), ms(s.median), ms(s.slowest))
}

func (r *golemRun) String() string {
	if r.end == 0 {
		return "no events: planned, nothing to do"
	}
	s := fmt.Sprintf("planned (lock, check, sweep, state calls) until the first event at %s, last event at %s", ms(r.firstEvent), ms(r.end))
	if r.network > 0 || r.payments > 0 {
		s += fmt.Sprintf("; network %s, payments %s", ms(r.network), ms(r.payments))
		if r.allocated > 0 {
			s += fmt.Sprintf(" (allocation recorded after %s, then the keeper)", ms(r.allocated))
		}
	}
	if r.services.n > 0 {
		s += fmt.Sprintf("; services' actions from %s to %s, each (fastest/median/slowest) %s", ms(r.servicesFrom), ms(r.servicesTo), r.services)
	}
	if r.negotiated.n > 0 {
		s += fmt.Sprintf(", of which agreement approved after %s, VPN joined after %s, activity after %s", r.negotiated, r.joined, r.activity)
	}
	return s
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// event is one line of the JSON event stream (docs/events.md).
type event struct {
	Type       string    `json:"type"`
	Time       time.Time `json:"time"`
	Resource   string    `json:"resource"`
	Phase      string    `json:"phase"`
	Message    string    `json:"message"`
	Output     string    `json:"output"`
	DurationMS int64     `json:"duration_ms"`
	Counts     struct {
		Changed int `json:"changed"`
		Failed  int `json:"failed"`
	} `json:"counts"`
}

// readRun reads the event stream of a command started at start; creates
// says its services' actions are creates, whose identity reports mark the
// steps of a rental.
func readRun(start time.Time, wall time.Duration, stderr []byte, creates bool) (*golemRun, error) {
	r := &golemRun{wall: wall, activityOf: map[string]string{}, doneAt: map[string]time.Time{}}
	actionStart := map[string]time.Time{}
	firstWith := map[string]map[string]time.Duration{} // service -> identity key -> since its action started
	var services []time.Duration
	summary := false
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			continue
		}
		var ev event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("event line %s: %w", line, err)
		}
		if ev.Type == "summary" {
			if ev.Counts.Failed > 0 {
				return nil, fmt.Errorf("%d resource(s) failed", ev.Counts.Failed)
			}
			r.changed, summary = ev.Counts.Changed, true
			continue
		}
		at := ev.Time.Sub(start)
		if r.firstEvent == 0 {
			r.firstEvent = at
		}
		r.end = max(r.end, at)
		service := strings.HasPrefix(ev.Resource, "services.")
		switch ev.Phase {
		case "action":
			if _, ok := actionStart[ev.Resource]; !ok {
				actionStart[ev.Resource] = ev.Time
			}
			if service && (r.servicesFrom == 0 || at < r.servicesFrom) {
				r.servicesFrom = at
			}
		case "identity":
			if strings.Contains(ev.Resource, "payments") && r.allocated == 0 {
				r.allocated = ev.Time.Sub(actionStart[ev.Resource])
			}
			if !creates || !service {
				continue
			}
			keys, _ := strings.CutPrefix(ev.Message, "recorded ")
			for _, k := range strings.Split(keys, ", ") {
				if firstWith[ev.Resource] == nil {
					firstWith[ev.Resource] = map[string]time.Duration{}
				}
				if _, ok := firstWith[ev.Resource][k]; !ok {
					firstWith[ev.Resource][k] = ev.Time.Sub(actionStart[ev.Resource])
				}
			}
		case "action-done":
			if m := activityInOutput.FindStringSubmatch(ev.Output); service && m != nil {
				r.activityOf[ev.Resource] = m[1]
			}
		case "done":
			d := time.Duration(ev.DurationMS) * time.Millisecond
			if s, ok := actionStart[ev.Resource]; ok {
				d = ev.Time.Sub(s) // the actions, not the wait for dependencies
			}
			switch {
			case service:
				services = append(services, d)
				r.doneAt[ev.Resource] = ev.Time
				r.servicesTo = max(r.servicesTo, at)
			case strings.HasPrefix(ev.Resource, "networks."):
				r.network = d
			case strings.Contains(ev.Resource, "payments"):
				r.payments = d
			}
		}
	}
	if !summary {
		return nil, fmt.Errorf("no summary in the event stream")
	}
	r.services = spreadOf(services)
	var negotiated, joined, activity []time.Duration
	for _, keys := range firstWith {
		if d, ok := keys["price"]; ok {
			negotiated = append(negotiated, d)
		}
		if d, ok := keys["ip"]; ok {
			joined = append(joined, d)
		}
		if d, ok := keys["activity_id"]; ok {
			activity = append(activity, d)
		}
	}
	r.negotiated, r.joined, r.activity = spreadOf(negotiated), spreadOf(joined), spreadOf(activity)
	return r, nil
}

// activityInOutput finds the activity in a service create's output
// (adapters/golem/service create: "service s: running on ..., activity <id>").
var activityInOutput = regexp.MustCompile(`running on .*, activity ([0-9a-f]+)`)

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
