package engine

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// A problem several adapter types report is one line naming them all; the
// run stops before any state call and before the state is first written.
func TestPreflightStopsBeforePlanningWithOneLinePerProblem(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     plan.Mode
		planOnly bool
	}{{"plan", plan.Deploy, true}, {"deploy", plan.Deploy, false}, {"refresh", plan.Refresh, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ad := memadapter.New()
			ad.CheckProblem = map[string]string{"mem": "KEY is not set in gcompose's environment", "other": "KEY is not set in gcompose's environment", "third": "api.example refused the key (401)"}
			e, st := newEngine(t, ad)
			want := diamond("v1")
			want["resources.x"] = &plan.Resource{Name: "resources.x", Type: "other", Config: map[string]any{}}
			want["resources.y"] = &plan.Resource{Name: "resources.y", Type: "third", Config: map[string]any{}}
			want["resources.z"] = &plan.Resource{Name: "resources.z", Type: "fine", Config: map[string]any{}}
			_, err := e.Run(context.Background(), Request{App: "app", Mode: tc.mode, Desired: want, PlanOnly: tc.planOnly})
			var pe *PreflightError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a PreflightError", err)
			}
			wantMsg := "KEY is not set in gcompose's environment (adapters mem, other), so nothing was planned\n" +
				"api.example refused the key (401) (adapter third), so nothing was planned"
			if err.Error() != wantMsg {
				t.Errorf("error:\n%s\nwant:\n%s", err, wantMsg)
			}
			if n := ad.CheckCalls.Load(); n != 4 {
				t.Errorf("%d check calls, want one per type (4)", n)
			}
			if n := ad.StateCalls.Load(); n != 0 {
				t.Errorf("%d state calls after a failed preflight", n)
			}
			doc, err := st.Load(context.Background(), "app")
			if err != nil || doc.Lineage != "" {
				t.Errorf("state written after a failed preflight: %+v, %v", doc, err)
			}
		})
	}
}

func TestPreflightPassesWhenEveryCheckIsOK(t *testing.T) {
	ad := memadapter.New()
	ad.CheckProblem = map[string]string{}
	e, _ := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	if n := ad.CheckCalls.Load(); n != 1 {
		t.Errorf("%d check calls, want 1", n)
	}
}

// checkModes records the mode each check call carried.
type checkModes struct {
	*memadapter.Adapter
	mu    sync.Mutex
	modes []plan.Mode
}

func (c *checkModes) Check(ctx context.Context, call plan.CheckCall) (*protocol.CheckResult, error) {
	c.mu.Lock()
	c.modes = append(c.modes, call.Mode)
	c.mu.Unlock()
	return c.Adapter.Check(ctx, call)
}

// A check call says which run it is made for (protocol.RequestExt.Mode):
// the Golem payments check launches the market watcher for a plan or a
// deploy only, not for a refresh or a destroy.
func TestCheckCallsSayTheirRun(t *testing.T) {
	ad := &checkModes{Adapter: memadapter.New()}
	ad.CheckProblem = map[string]string{}
	e := &Engine{Adapters: ad, Store: state.NewMemoryStore(), Parallelism: 4}
	deploy(t, e, diamond("v1"))
	for _, tc := range []struct {
		mode     plan.Mode
		planOnly bool
	}{{plan.Deploy, true}, {plan.Refresh, true}, {plan.Destroy, true}, {plan.Deploy, false}} {
		ad.modes = nil
		req := Request{App: "app", Mode: tc.mode, PlanOnly: tc.planOnly}
		if tc.mode == plan.Deploy {
			req.Desired = diamond("v1")
		}
		if _, err := e.Run(context.Background(), req); err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if len(ad.modes) != 1 || ad.modes[0] != tc.mode {
			t.Errorf("%s (plan only %v): check calls carried %v, want one with %q", tc.mode, tc.planOnly, ad.modes, tc.mode)
		}
	}
}
