package enginebench

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// size is n unless GCOMPOSE_BENCH_<name> says otherwise (to try a benchmark
// quickly at a smaller size; the documented figures use the defaults).
func size(name string, n int) int {
	if v, err := strconv.Atoi(os.Getenv("GCOMPOSE_BENCH_" + name)); err == nil && v > 0 {
		return v
	}
	return n
}

// loadavg is the 1-minute load average (the machine is shared: figures are
// read next to it).
func loadavg() float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(raw))[0], 64)
	return f
}

func mustNoChanges(b *testing.B, what string, out *engine.Outcome, err error) {
	b.Helper()
	if err != nil {
		b.Fatalf("%s: %v", what, err)
	}
	if out.Plan.HasChanges() {
		b.Fatalf("%s: plan has changes %+v", what, out.Plan.Summary)
	}
}

// BenchmarkRedeploy is issue 5's benchmark 1: a re-deploy (nothing to
// change) of N = 1,000 file resources of one adapter image, served (one
// long-lived container) and one call per container, parallelism 10, side
// by side in one run; and the Deployster-like baseline (a container per
// call, init per resource without cache, parallelism 1), measured at a
// smaller N (50) and extrapolated linearly to 1,000 (each of its resources
// costs the same two containers in sequence). It also measures a served
// call's latency alone (sequential state calls of one resource through the
// protocol client) and a one-shot call's, for the per-call overhead.
func BenchmarkRedeploy(b *testing.B) {
	n, nBase := size("REDEPLOY_N", 1000), size("BASELINE_N", 50)
	h := newHarness(b, 55*time.Minute)
	want := files("redeploy", n, 0, "x")
	wantBase := files("baseline", nBase, 0, "x")
	// The state both re-deploys start from (served: the fastest way there).
	out, fresh, err := h.run("redeploy", want, false, 10, nil)
	if err != nil || out.Plan.Summary.Create != n {
		b.Fatalf("first deploy: %v %+v", err, out.Plan.Summary)
	}
	if _, _, err := h.run("baseline", wantBase, false, 10, nil); err != nil {
		b.Fatalf("first deploy of the baseline: %v", err)
	}
	b.Logf("first deploy of %d (served, parallelism 10): %.2f s", n, fresh.Seconds())
	h.count.take()

	var served, oneShot, base, callServed, callOneShot time.Duration
	load0 := loadavg()
	b.ResetTimer()
	for range b.N {
		out, served, err = h.run("redeploy", want, false, 10, nil)
		mustNoChanges(b, "served re-deploy", out, err)
		out, oneShot, err = h.run("redeploy", want, true, 10, nil)
		mustNoChanges(b, "one-shot re-deploy", out, err)
		out, base, err = h.run("baseline", wantBase, true, 1, func(plan.Adapters) plan.Adapters { return h.deploysterLike() })
		mustNoChanges(b, "Deployster-like re-deploy", out, err)
		callServed = h.callLatency(b, false, 500)
		callOneShot = h.callLatency(b, true, 10)
	}
	b.StopTimer()
	load1 := loadavg()
	baseEach := base / time.Duration(nBase)
	baseExtra := baseEach * time.Duration(n)
	b.ReportMetric(served.Seconds(), "served-s")
	b.ReportMetric(oneShot.Seconds(), "oneshot-s")
	b.ReportMetric(baseExtra.Seconds(), "deployster-like-extrapolated-s")
	b.ReportMetric(oneShot.Seconds()/served.Seconds(), "oneshot/served")
	b.ReportMetric(baseExtra.Seconds()/served.Seconds(), "deployster-like/served")
	b.ReportMetric(float64(served.Microseconds())/1000/float64(n), "served-ms/resource")
	b.ReportMetric(float64(callServed.Microseconds())/1000, "served-call-ms")
	b.ReportMetric(float64(callOneShot.Microseconds())/1000, "oneshot-call-ms")
	b.ReportMetric(load0, "load-before")
	b.ReportMetric(load1, "load-after")
	b.Logf("re-deploy of %d unchanged resources, one run, load %.2f -> %.2f:", n, load0, load1)
	b.Logf("  served, parallelism 10:            %8.2f s  (%.2f ms/resource)", served.Seconds(), float64(served.Microseconds())/1000/float64(n))
	b.Logf("  one call per container, par. 10:   %8.2f s  (%.1fx served)", oneShot.Seconds(), oneShot.Seconds()/served.Seconds())
	b.Logf("  Deployster-like, par. 1, N=%d:     %8.2f s  measured = %.3f s/resource", nBase, base.Seconds(), baseEach.Seconds())
	b.Logf("  Deployster-like extrapolated to %d: %8.1f s  (%.0fx served, %.1fx one-shot)", n, baseExtra.Seconds(), baseExtra.Seconds()/served.Seconds(), baseExtra.Seconds()/oneShot.Seconds())
	b.Logf("  one state call, sequential: served %.2f ms, one-shot %.0f ms", float64(callServed.Microseconds())/1000, float64(callOneShot.Microseconds())/1000)
	b.Logf("  containers started: %v", h.count.take())
}

// callLatency is the mean time of one state call (VALID) of one resource
// through the protocol client, calls made one after the other; served, the
// server is started (and init answered) before timing.
func (h *harness) callLatency(b *testing.B, noServe bool, calls int) time.Duration {
	b.Helper()
	c := h.client(noServe)
	defer c.Close(h.ctx)
	ad := &engine.ContainerAdapters{Client: c, Plugs: h.plugs()}
	call := plan.Call{App: "latency", Name: "files.f0000", Type: image, Config: map[string]any{"path": "redeploy/f0000", "content": "x"}}
	ask := func() {
		st, err := ad.State(h.ctx, call, protocol.Present)
		if err != nil || st.Status != protocol.Valid {
			b.Fatalf("state call: %v %+v", err, st)
		}
	}
	ask() // warm: init, and the server when served
	start := time.Now()
	for range calls {
		ask()
	}
	return time.Since(start) / time.Duration(calls)
}

// BenchmarkFreshDeploy is issue 5's benchmark 2: a fresh deploy of N = 200
// independent file resources whose create action sleeps 50 ms, served and
// one-shot, against the ideal: the critical path of the actions alone with
// P actions at a time, 50 ms x ceil(N/P) (what an engine costing nothing
// and adapters answering state calls instantly would take). Served runs at
// parallelism 10, 50 and 200; one-shot at 10.
func BenchmarkFreshDeploy(b *testing.B) {
	n := size("FRESH_N", 200)
	const delay = 50 * time.Millisecond
	h := newHarness(b, 55*time.Minute)
	type variant struct {
		noServe bool
		p       int
	}
	variants := []variant{{false, 10}, {false, 50}, {false, 200}, {true, 10}}
	times := make([]time.Duration, len(variants))
	timings := make([]*timing, len(variants))
	// Warm the init cache and the image so the first variant pays no more
	// than the others.
	if _, _, err := h.run("warm", files("warm", 1, 0, "x"), false, 1, nil); err != nil {
		b.Fatal(err)
	}
	h.count.take()
	load0 := loadavg()
	b.ResetTimer()
	for i := range b.N {
		for j, v := range variants {
			app := fmt.Sprintf("fresh-%d-%d-%t", i, v.p, v.noServe)
			want := files(app, n, int(delay/time.Millisecond), "x")
			out, d, tm, err := h.timedRun(app, want, v.noServe, v.p)
			if err != nil || out.Plan.Summary.Create != n {
				b.Fatalf("%s: %v %+v", app, err, out.Plan.Summary)
			}
			times[j], timings[j] = d, tm
		}
	}
	b.StopTimer()
	load1 := loadavg()
	b.Logf("fresh deploy of %d resources, each action %s, one run, load %.2f -> %.2f:", n, delay, load0, load1)
	for j, v := range variants {
		ideal := delay * time.Duration((n+v.p-1)/v.p)
		mode := "served"
		if v.noServe {
			mode = "one-shot"
		}
		ratio := times[j].Seconds() / ideal.Seconds()
		b.ReportMetric(times[j].Seconds(), fmt.Sprintf("%s-p%d-s", mode, v.p))
		b.ReportMetric(ratio, fmt.Sprintf("%s-p%d/ideal", mode, v.p))
		b.Logf("  %-8s parallelism %3d: %7.2f s; ideal %5.2f s; %.2fx ideal; %s", mode, v.p, times[j].Seconds(), ideal.Seconds(), ratio, timings[j])
	}
	b.ReportMetric(times[3].Seconds()/times[0].Seconds(), "oneshot/served-p10")
	b.ReportMetric(load0, "load-before")
	b.ReportMetric(load1, "load-after")
	b.Logf("  containers started: %v", h.count.take())
}
