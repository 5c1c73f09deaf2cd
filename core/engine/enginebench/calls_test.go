package enginebench

import (
	"maps"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/plan"
)

// TestCallsPerResource is issue 5's "no wasted calls" with the real file
// adapter, served and one call per container: init runs once per image
// (once for all resources of a run, never again in a later run: the answer
// is cached by image ID on disk); state calls of the planning step run in
// parallel, never more than the parallelism; and each resource costs
// exactly the calls its answer needs: a deploy asks its state and runs its
// action, which answers the state it left (protocol extension
// action_state), or, when the client does not ask for that, asks again
// (verify); a re-deploy asks its state once.
func TestCallsPerResource(t *testing.T) {
	const n, par = 12, 4
	h := newHarness(t, 5*time.Minute)
	for _, mode := range []string{"served", "one-shot", "served-verify"} {
		t.Run(mode, func(t *testing.T) {
			noServe := mode == "one-shot"
			verify := mode == "served-verify"
			want := h.fileResources(mode, n, 0, "content")
			var ca *countingAdapters
			wrap := func(ad plan.Adapters) plan.Adapters {
				// Held 30 ms, state calls that may overlap do.
				ca = &countingAdapters{Adapters: ad, Hold: 30 * time.Millisecond}
				return ca
			}
			check := func(run string, wantPer string, wantContainers map[string]int) {
				t.Helper()
				if got := ca.perResource(); !maps.Equal(got, map[string]int{wantPer: n}) {
					t.Errorf("%s: calls per resource %v, want %q for all %d", run, got, wantPer, n)
				}
				if got := h.count.take(); !maps.Equal(got, wantContainers) {
					t.Errorf("%s: containers %v, want %v", run, got, wantContainers)
				}
				if m := ca.maxState.Load(); m < 2 || m > par {
					t.Errorf("%s: at most %d state calls in flight, want 2..%d (parallel and bounded)", run, m, par)
				}
			}
			h.count.take()
			out, _, err := h.runWith(mode, want, noServe, verify, par, wrap)
			if err != nil || out.Plan.Summary.Create != n {
				t.Fatalf("deploy: %v %+v", err, out.Plan.Summary)
			}
			checkFiles(t, h.files, want)
			deployContainers := map[string]int{"serve": 1}
			if noServe {
				deployContainers = map[string]int{"state": n, "action create": n}
			}
			if mode == "served" { // the first run of the harness: init not cached yet
				deployContainers["init"] = 1
			}
			// Two describes on a create: one to plan it, one to read the outputs
			// it declares (references to undeclared outputs fail at plan time).
			// Both are answered from the init cache: the container counts below
			// show no second init.
			wantCalls := "action create=1, describe=2, state present=1"
			if verify {
				wantCalls = "action create=1, describe=2, state present=2"
			}
			check("deploy", wantCalls, deployContainers)

			out, _, err = h.runWith(mode, want, noServe, verify, par, wrap)
			if err != nil || out.Plan.HasChanges() {
				t.Fatalf("re-deploy: %v %+v", err, out.Plan.Summary)
			}
			redeployContainers := map[string]int{"serve": 1}
			if noServe {
				redeployContainers = map[string]int{"state": n}
			}
			check("re-deploy", "describe=1, state present=1", redeployContainers)
		})
	}
	if t.Failed() {
		return
	}
	// A gcompose without the disk cache (another machine) runs init once.
	h.cache = t.TempDir()
	out, _, err := h.run("served", h.fileResources("served", n, 0, "content"), false, par, nil)
	if err != nil || out.Plan.HasChanges() {
		t.Fatalf("re-deploy without cache: %v %+v", err, out.Plan.Summary)
	}
	if got := h.count.take(); !maps.Equal(got, map[string]int{"init": 1, "serve": 1}) {
		t.Errorf("re-deploy without cache: containers %v, want one init and one server", got)
	}
}
