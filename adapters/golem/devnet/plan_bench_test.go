package devnet_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/benchmetrics"
)

// BenchmarkGolemPlan times `gcompose plan` of an app shaped as
// examples/webapp (two payloads of different constraints, the web service's
// init reading the database's VPN address) before its first deploy,
// against the devnet over HTTP with the adapter images of this tree, with a
// warm offer book (the market watcher running, as after a first plan) and a
// cold one (no watcher: the plan starts it and waits one offer window, 5 s
// by default, for every estimate), and when the cold plan's window opened
// (the service adapter's estimate lines, with --verbose).
// GCOMPOSE_BENCH_PLAN_RUNS sets how many plans of each are timed (3).
func BenchmarkGolemPlan(b *testing.B) {
	runs := 3
	if v := os.Getenv("GCOMPOSE_BENCH_PLAN_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GCOMPOSE_BENCH_PLAN_RUNS=%q: want a count", v)
		}
		runs = n
	}
	g := startGolemBench(b, []devnet.ProviderConfig{
		{Name: "bench", Count: 4, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.0001, 0.0002, 0}},
	})
	desc := filepath.Join(g.dir, "webapp.yaml")
	if err := os.WriteFile(desc, []byte(webappLike("bench-plan")), 0o644); err != nil {
		b.Fatal(err)
	}
	g.b.Cleanup(func() { g.removeApp("bench-plan") })
	// Warm: the init cache on disk, the images' first start.
	g.plan("bench-plan", desc)

	load0 := benchmetrics.LoadAvg()
	var warm, cold, opened, after []time.Duration
	b.ResetTimer()
	for range b.N {
		for range runs {
			warm = append(warm, g.plan("bench-plan", desc))
			b.StopTimer()
			g.removeWatcher()
			b.StartTimer()
			pt := g.planTimed("bench-plan", desc)
			cold = append(cold, pt.took)
			if pt.opened == 0 {
				b.Fatalf("the cold plan waited no offer window")
			}
			opened, after = append(opened, pt.opened), append(after, pt.after)
		}
	}
	b.StopTimer()
	load1 := benchmetrics.LoadAvg()
	show := func(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }
	show("%s: plan of a webapp-shaped app (2 payloads, 2 services, one VPN) before its first deploy, load %.2f -> %.2f", b.Name(), load0, load1)
	w := spreadOf(append([]time.Duration(nil), warm...))
	c := spreadOf(append([]time.Duration(nil), cold...))
	show("plan, warm offer book: %d runs, fastest/median/slowest %s (each: %v)", len(warm), w, warm)
	show("plan, cold offer book (no watcher): %d runs, fastest/median/slowest %s (each: %v)", len(cold), c, cold)
	show("cold: the offer window opened %s after gcompose started, the plan ended %s after it closed (fastest/median/slowest)", spreadOf(opened), spreadOf(after))
	b.ReportMetric(w.median.Seconds(), "plan-warm-s")
	b.ReportMetric(c.median.Seconds(), "plan-cold-s")
	b.ReportMetric(spreadOf(opened).median.Seconds(), "cold-window-opened-s")
}

// webappLike is examples/webapp with the devnet's test image for both
// payloads.
func webappLike(app string) string {
	return fmt.Sprintf(`meta:
  name: %q
payloads:
  db-server:
    runtime: vm
    constraints: ["golem.inf.storage.gib>10"]
    capabilities: [vpn]
    params:
      image_hash: %q
  web-server:
    runtime: vm
    constraints: ["golem.inf.mem.gib>=4"]
    capabilities: [vpn]
    params:
      image_hash: %q
networks:
  default:
    ip: "192.168.77.1/24"
services:
  db-service:
    payload: db-server
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "/devnet-db -listen :4001 > /tmp/db.out 2> /tmp/db.err &"]
  web-service:
    payload: web-server
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "echo ${services.db-service.network_node.ip}"]
`, app, testHash, testHash)
}

// plan runs `gcompose plan` and returns how long it took.
func (g *golemBench) plan(app, desc string) time.Duration {
	g.b.Helper()
	return g.planTimed(app, desc).took
}

// planTimes is one plan's time, and for a plan that waited an offer window,
// when the window opened (since gcompose started) and how long the plan
// took after it closed.
type planTimes struct {
	took, opened, after time.Duration
}

// estimated is the service adapter's debug line of an estimate (with
// --verbose): its time and how long it waited for the offer window.
var estimated = regexp.MustCompile(`time=(\S+) level=DEBUG msg="market asked for the plan's estimate" .* waited=(\S+)`)

// planTimed runs `gcompose plan` and times it.
func (g *golemBench) planTimed(app, desc string) planTimes {
	g.b.Helper()
	g.settle(app)
	args := []string{"plan", "-f", desc, "--app", app, "--state", filepath.Join(g.dir, "state"), "--verbose",
		"--network-image", g.images["network"], "--service-image", g.images["service"],
		"--payments-image", g.images["payments"], "--proxy-image", g.images["proxy"]}
	cmd := exec.CommandContext(g.ctx, g.bin, args...)
	cmd.Dir = g.dir
	cmd.Env = append(os.Environ(), "YAGNA_API_URL="+g.url, "GOLEM_REGISTRY_URL="+g.url, "YAGNA_APPKEY="+testKey, "XDG_CACHE_HOME="+filepath.Join(g.dir, "cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		g.b.Fatalf("gcompose plan %s: %v\n%s\n%s", app, err, tail(stdout.String(), 4000), tail(stderr.String(), 8000))
	}
	// A plan leaves no demand behind: the next plan's sweep would find it.
	if strings.Contains(stderr.String(), "found demand") {
		g.b.Fatalf("gcompose plan %s found a demand a plan before it left:\n%s", app, tail(stderr.String(), 4000))
	}
	if os.Getenv("GCOMPOSE_BENCH_PLAN_SHOW") != "" {
		fmt.Printf("%s\n%s\n", stdout.String(), tail(stderr.String(), 6000))
	}
	pt := planTimes{took: d}
	for _, m := range estimated.FindAllStringSubmatch(stderr.String(), -1) {
		at, err1 := time.Parse(time.RFC3339Nano, m[1])
		waited, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil || waited < time.Second {
			continue
		}
		pt.opened, pt.after = at.Add(-waited).Sub(start), start.Add(d).Sub(at)
	}
	return pt
}
