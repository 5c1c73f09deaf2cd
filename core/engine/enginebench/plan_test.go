package enginebench

import (
	"fmt"
	"time"

	"testing"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/benchmetrics"
)

// BenchmarkPlanUnchanged measures gcompose plan of a deployed, unchanged
// application of GCOMPOSE_BENCH_PLAN_N (10) file resources: each run a new
// protocol client (a new gcompose process; init answered from the disk
// cache), wired as the CLI wires it, GCOMPOSE_BENCH_PLAN_ROUNDS (9) runs,
// the median reported with where its time went before the first resource
// was asked (lock, leftover cleanup, state load, server start).
func BenchmarkPlanUnchanged(b *testing.B) {
	n := benchmetrics.Size("PLAN_N", 10)
	rounds := benchmetrics.Size("PLAN_ROUNDS", 9)
	h := newHarness(b, 20*time.Minute)
	want := h.fileResources("plan", n, 0, "x")
	if _, _, err := h.run("plan", want, false, 10, nil); err != nil {
		b.Fatal(err)
	}
	load0 := benchmetrics.LoadAvg()
	var runs []sample
	b.ResetTimer()
	for range b.N {
		for range rounds {
			d, tm, err := h.planRun("plan", want, 10)
			if err != nil {
				b.Fatal(err)
			}
			runs = append(runs, sample{d: d, detail: tm.String()})
		}
	}
	b.StopTimer()
	med, best := median(runs), fastest(runs)
	fmt.Printf("    %s: plan of %d unchanged file resources, median of %d runs, load %.2f -> %.2f: %.3f s (fastest %.3f s); median run: %s\n",
		b.Name(), n, len(runs), load0, benchmetrics.LoadAvg(), med.d.Seconds(), best.d.Seconds(), med.detail)
	b.ReportMetric(med.d.Seconds(), "plan-s")
}

// planRun is one gcompose plan of want, timed.
func (h *harness) planRun(app string, want map[string]*plan.Resource, parallelism int) (time.Duration, *timing, error) {
	e, tm := h.timedEngine(false, false, parallelism)
	tm.t0 = time.Now()
	out, err := e.Run(h.ctx, engine.Request{App: app, Mode: plan.Deploy, Desired: want, PlanOnly: true})
	d := time.Since(tm.t0)
	if err == nil && out.Plan.HasChanges() {
		err = fmt.Errorf("plan of the unchanged %s has changes: %+v", app, out.Plan.Summary)
	}
	return d, tm, err
}
