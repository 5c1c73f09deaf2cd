package plan_test

import (
	"context"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// refreshSeen records, per mode run, whether the state calls carried
// Refresh.
type refreshSeen struct {
	*memadapter.Adapter
	mu    sync.Mutex
	calls map[bool]int
}

func (r *refreshSeen) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	r.mu.Lock()
	r.calls[c.Refresh]++
	r.mu.Unlock()
	return r.Adapter.State(ctx, c, desired)
}

// A refresh's state calls say so (protocol.RequestExt.Refresh: the Golem
// payments adapter starts the market watcher only for a plan or deploy);
// a deploy's and a destroy's do not.
func TestRefreshStateCallsSayRefresh(t *testing.T) {
	ad := &refreshSeen{Adapter: memadapter.New(), calls: map[bool]int{}}
	st, _ := deployedIn(t, ad, chain("v1", "nginx"))
	if ad.calls[true] != 0 || ad.calls[false] == 0 {
		t.Fatalf("deploy: %d state calls with refresh, %d without; want none with", ad.calls[true], ad.calls[false])
	}
	for _, mode := range []plan.Mode{plan.Refresh, plan.Deploy, plan.Destroy} {
		ad.calls = map[bool]int{}
		e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
		req := engine.Request{App: "app", Mode: mode, PlanOnly: true}
		if mode == plan.Deploy {
			req.Desired = chain("v1", "nginx")
		}
		if _, err := e.Run(context.Background(), req); err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		refresh, other := ad.calls[true], ad.calls[false]
		if want := mode == plan.Refresh; (refresh > 0) != want || (other > 0) == want || refresh+other == 0 {
			t.Errorf("%s: %d state calls with refresh, %d without", mode, refresh, other)
		}
	}
}
