package enginebench

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/benchmetrics"
	"github.com/gcompose/gcompose/protocol"
)

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
	n, nBase := benchmetrics.Size("REDEPLOY_N", 1000), benchmetrics.Size("BASELINE_N", 50)
	h := newHarness(b, 55*time.Minute)
	want := h.fileResources("redeploy", n, 0, "x")
	wantBase := h.fileResources("baseline", nBase, 0, "x")
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
	load0 := benchmetrics.LoadAvg()
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
	load1 := benchmetrics.LoadAvg()
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
	ad := &adapter.ContainerAdapters{Client: c, Plugs: h.plugs()}
	call := plan.Call{App: "latency", Name: "files.f0000", Type: h.image, Config: map[string]any{"path": "redeploy/f0000", "content": "x"}}
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

// BenchmarkFreshDeploy is issue 5's benchmark 2, and issue 17's: a fresh
// deploy of N = 200 independent file resources whose create action sleeps
// 50 ms, against the ideal: the critical path of the actions alone with P
// actions at a time, 50 ms x ceil(N/P) (what an engine costing nothing and
// adapters answering instantly would take). Served at parallelism 10, 50
// and 200, each three ways side by side: the action answering its
// resource's state (action_state, what gcompose does), a state call
// verifying every resource after its action (what it did before), and the
// adapter alone: the same server start, state calls and actions through
// the protocol client without the engine (no state writes, no plan), the
// floor any engine pays with this adapter on this machine. One-shot at 10.
func BenchmarkFreshDeploy(b *testing.B) {
	n := benchmetrics.Size("FRESH_N", 200)
	const delay = 50 * time.Millisecond
	h := newHarness(b, 55*time.Minute)
	type variant struct {
		mode string // "answer", "verify", "adapter", "one-shot"
		p    int
	}
	var variants []variant
	for _, p := range []int{10, 50, 200} {
		variants = append(variants, variant{"adapter", p}, variant{"verify", p}, variant{"answer", p})
	}
	if os.Getenv("GCOMPOSE_BENCH_FRESH_ONESHOT") != "0" { // 0: a profile of the served runs alone
		variants = append(variants, variant{"one-shot", 10})
	}
	// The machine is shared: every variant runs rounds times, interleaved,
	// and the median is reported (with the fastest), not one sample.
	rounds := benchmetrics.Size("FRESH_ROUNDS", 3)
	runs := make([][]sample, len(variants))
	// Warm the init cache and the image so the first variant pays no more
	// than the others.
	if _, _, err := h.run("warm", h.fileResources("warm", 1, 0, "x"), false, 1, nil); err != nil {
		b.Fatal(err)
	}
	h.count.take()
	load0 := benchmetrics.LoadAvg()
	b.ResetTimer()
	for i := range b.N {
		for r := range rounds {
			for j, v := range variants {
				if v.mode == "one-shot" && r > 0 {
					continue // a minute each; its ratio to served is two orders of magnitude
				}
				app := fmt.Sprintf("fresh-%d-%d-%d-%s", i, r, v.p, v.mode)
				want := h.fileResources(app, n, int(delay/time.Millisecond), "x")
				cpu0 := processCPU()
				if v.mode == "adapter" {
					d, detail := h.adapterAlone(b, app, want, v.p)
					runs[j] = append(runs[j], sample{d, processCPU() - cpu0, detail})
					continue
				}
				out, d, tm, err := h.timedRun(app, want, v.mode == "one-shot", v.mode == "verify", v.p)
				if err != nil || out.Plan.Summary.Create != n {
					b.Fatalf("%s: %v %+v", app, err, out.Plan.Summary)
				}
				runs[j] = append(runs[j], sample{d, processCPU() - cpu0, tm.String()})
			}
		}
	}
	b.StopTimer()
	load1 := benchmetrics.LoadAvg()
	// Printed, not logged: go test keeps only 10 lines of a benchmark's log.
	show := func(format string, args ...any) { fmt.Printf("    "+format+"\n", args...) }
	show("%s: fresh deploy of %d resources, each action %s, median of %d rounds (one-shot: 1), load %.2f -> %.2f:", b.Name(), n, delay, rounds, load0, load1)
	floor, floorRuns := map[int]time.Duration{}, map[int][]sample{}
	for j, v := range variants {
		if v.mode == "adapter" {
			floor[v.p], floorRuns[v.p] = median(runs[j]).d, runs[j]
		}
	}
	for j, v := range variants {
		ideal := delay * time.Duration((n+v.p-1)/v.p)
		med, best := median(runs[j]), fastest(runs[j])
		ratio := med.d.Seconds() / ideal.Seconds()
		b.ReportMetric(med.d.Seconds(), fmt.Sprintf("%s-p%d-s", v.mode, v.p))
		b.ReportMetric(ratio, fmt.Sprintf("%s-p%d/ideal", v.mode, v.p))
		over := ""
		if f, ok := floor[v.p]; ok && v.mode != "adapter" {
			// The target: gcompose adds at most 10 % to the adapter alone.
			// Each round's run against the adapter alone a second before it:
			// the load moves between rounds more than within one.
			paired := pairedRatios(runs[j], floorRuns[v.p])
			over = fmt.Sprintf(", %+.0f ms over the adapter alone (%.3fx it; round by round: median %.3fx, %.3f–%.3fx)",
				float64((med.d-f).Microseconds())/1000, med.d.Seconds()/f.Seconds(), paired[len(paired)/2], paired[0], paired[len(paired)-1])
			b.ReportMetric(med.d.Seconds()/f.Seconds(), fmt.Sprintf("%s-p%d/adapter", v.mode, v.p))
			b.ReportMetric(paired[len(paired)/2], fmt.Sprintf("%s-p%d/adapter-paired", v.mode, v.p))
		}
		cpu := medianCPU(runs[j])
		b.ReportMetric(float64(cpu.Microseconds())/1000, fmt.Sprintf("%s-p%d-cpu-ms", v.mode, v.p))
		show("  %-8s parallelism %3d: %6.3f s (fastest %.3f s); ideal %4.2f s; %.2fx ideal (fastest %.2fx)%s; this process's CPU (user+system) a run: median %.0f ms; median run: %s",
			v.mode, v.p, med.d.Seconds(), best.d.Seconds(), ideal.Seconds(), ratio, best.d.Seconds()/ideal.Seconds(), over, float64(cpu.Microseconds())/1000, med.detail)
	}
	b.ReportMetric(load0, "load-before")
	b.ReportMetric(load1, "load-after")
	show("  containers started: %v", h.count.take())
}

// pairedRatios are run i of s over run i of floor (the same round), sorted.
func pairedRatios(s, floor []sample) []float64 {
	out := make([]float64, 0, len(s))
	for i := range min(len(s), len(floor)) {
		out = append(out, s[i].d.Seconds()/floor[i].d.Seconds())
	}
	sort.Float64s(out)
	return out
}

// sample is one measured run, the CPU this process used during it (the
// engine and the protocol client; the adapter and the Engine run in other
// processes) and where its time went.
type sample struct {
	d, cpu time.Duration
	detail string
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// medianCPU is the median of the samples' CPU times.
func medianCPU(s []sample) time.Duration {
	cpu := make([]time.Duration, len(s))
	for i, x := range s {
		cpu[i] = x.cpu
	}
	slices.Sort(cpu)
	return cpu[len(cpu)/2]
}

// median is the middle sample (the slower of the two middle ones).
func median(s []sample) sample {
	sorted := append([]sample(nil), s...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].d < sorted[j].d })
	return sorted[len(sorted)/2]
}

func fastest(s []sample) sample {
	best := s[0]
	for _, x := range s[1:] {
		if x.d < best.d {
			best = x
		}
	}
	return best
}

// adapterAlone does what a deploy of want needs from the adapter, without
// the engine: one client (a gcompose run), a state call per resource, then
// its create action (asked for the state it leaves, as gcompose asks), P at
// a time each, and the server stopped. No lock, plan, state writes or
// graph walk: the floor of the served deploy with this adapter.
func (h *harness) adapterAlone(b *testing.B, app string, want map[string]*plan.Resource, p int) (time.Duration, string) {
	b.Helper()
	tm := &timing{}
	c := h.clientWith(timedRunner{h.count, tm}, false, false)
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	target := func(name string) adapter.Target {
		r := want[name]
		return adapter.Target{App: app, Lineage: "bench", Name: name, Image: r.Type, Config: r.Config, Plugs: h.plugs()}
	}
	answers := make([]*protocol.StateResult, len(names))
	start := time.Now()
	parallel(p, len(names), func(i int) {
		st, err := c.State(h.ctx, target(names[i]), protocol.Present, nil)
		if err != nil || st.Status != protocol.Stale {
			b.Errorf("state call of %s: %v %+v", names[i], err, st)
		}
		answers[i] = st
	})
	planned := time.Since(start)
	var actMu sync.Mutex
	var actSum time.Duration
	parallel(p, len(names), func(i int) {
		if answers[i] == nil {
			return
		}
		t0 := time.Now()
		defer func() {
			actMu.Lock()
			actSum += time.Since(t0)
			actMu.Unlock()
		}()
		t := target(names[i])
		t.AnswerState = protocol.Present
		t.Operation = &protocol.Operation{ID: fmt.Sprintf("op-%d", i), Kind: protocol.ChangeCreate, Action: "create", StartedAt: time.Now().UTC()}
		a := answers[i].Actions[0]
		out, err := c.Action(h.ctx, t, a, answers[i].StaleState, nil)
		if err != nil || out.State == nil || out.State.Status != protocol.Valid {
			b.Errorf("action of %s: %v %+v", names[i], err, out)
		}
	})
	acted := time.Since(start)
	if err := c.Close(h.ctx); err != nil {
		b.Error(err)
	}
	total := time.Since(start)
	if b.Failed() {
		b.FailNow()
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return total, fmt.Sprintf("server start %.1f ms; state calls until %.1f ms; actions until %.1f ms (an action %.1f ms on average); release %.1f ms",
		ms(tm.serverStart), ms(planned), ms(acted), ms(actSum/time.Duration(len(names))), ms(total-acted))
}

// parallel calls fn(0..n-1), p at a time.
func parallel(p, n int, fn func(i int)) {
	sem := make(chan struct{}, p)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}
