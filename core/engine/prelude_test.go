package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// barrier lets n parties through once all n arrived; a party that waits
// longer than a timeout gives up, and the test fails: what it waited for
// did not run at the same time as it.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait() bool {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// slowLoad is a store whose first Load waits at a barrier.
type slowLoad struct {
	state.Store
	once sync.Once
	b    *barrier
	ok   bool
}

func (s *slowLoad) Load(ctx context.Context, app string) (*state.Document, error) {
	s.once.Do(func() { s.ok = s.b.wait() })
	return s.Store.Load(ctx, app)
}

// chain is three resources of three adapter types, each depending on the
// one before: started on first use, their servers would start one after
// another, each once the one before was planned.
func chain() map[string]*plan.Resource {
	return map[string]*plan.Resource{
		"resources.a": {Name: "resources.a", Type: "type-a", Config: map[string]any{"value": "a"}},
		"resources.b": {Name: "resources.b", Type: "type-b", Config: map[string]any{"value": "b"}, DependsOn: []string{"resources.a"}},
		"resources.c": {Name: "resources.c", Type: "type-c", Config: map[string]any{"value": "c"}, DependsOn: []string{"resources.b"}},
	}
}

func TestServersStartAtOnceWithCleanupAndStateLoad(t *testing.T) {
	// Every type's start, the leftover cleanup and the state load wait for
	// each other at one barrier: run one after another, the first to
	// arrive would wait forever (10 s) and the test fails.
	b := newBarrier(3 + 2)
	st := &slowLoad{Store: state.NewMemoryStore(), b: b}
	var mu sync.Mutex
	warmed := map[string]string{}
	warmOK := true
	released := false
	e := &Engine{Adapters: memadapter.New(), Store: st, Parallelism: 4,
		Warm: func(ctx context.Context, l *state.Lock, typ, resource string) error {
			if l == nil || l.App != "app" {
				t.Errorf("warm of %s without the app's lock: %+v", typ, l)
			}
			ok := b.wait()
			mu.Lock()
			defer mu.Unlock()
			warmed[typ] = resource
			warmOK = warmOK && ok
			if released {
				t.Errorf("warm of %s returned after the release", typ)
			}
			return nil
		},
		Cleanup: func(ctx context.Context, l *state.Lock) (int, error) {
			if !b.wait() {
				t.Error("cleanup waited alone: it ran before or after the others")
			}
			return 0, nil
		},
		Release: func(context.Context) error {
			mu.Lock()
			released = true
			mu.Unlock()
			return nil
		},
	}
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: chain()})
	if err != nil {
		t.Fatal(err)
	}
	if out.Plan.Summary.Create != 3 {
		t.Fatalf("plan %+v, want 3 creates", out.Plan.Summary)
	}
	if !warmOK || !st.ok {
		t.Fatalf("the servers' starts and the state load did not run at once (warm %v, load %v)", warmOK, st.ok)
	}
	want := map[string]string{"type-a": "resources.a", "type-b": "resources.b", "type-c": "resources.c"}
	if len(warmed) != len(want) {
		t.Fatalf("warmed %v, want %v", warmed, want)
	}
	for typ, res := range want {
		if warmed[typ] != res {
			t.Fatalf("warmed %v, want %v", warmed, want)
		}
	}
}

func TestDestroyStartsTheServersOfTheStatesTypes(t *testing.T) {
	ad := memadapter.New()
	e, _ := newEngine(t, ad)
	deploy(t, e, chain())
	var mu sync.Mutex
	warmed := map[string]bool{}
	e.Warm = func(ctx context.Context, l *state.Lock, typ, resource string) error {
		mu.Lock()
		warmed[typ] = true
		mu.Unlock()
		return nil
	}
	if _, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Destroy}); err != nil {
		t.Fatal(err)
	}
	if len(warmed) != 3 {
		t.Fatalf("destroy warmed %v, want the three types in the state", warmed)
	}
}

// estimating holds every state call of a payload at a barrier: the K
// payloads' estimates (one offer window each on Golem) must be asked at
// once, not one after another.
type estimating struct {
	*memadapter.Adapter
	b  *barrier
	mu sync.Mutex
	ok bool
}

func (a *estimating) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	if c.Type == "payload" {
		ok := a.b.wait()
		a.mu.Lock()
		a.ok = a.ok && ok
		a.mu.Unlock()
	}
	return a.Adapter.State(ctx, c, desired)
}

func TestPayloadsAreEstimatedAtOnce(t *testing.T) {
	const k = 6
	want := map[string]*plan.Resource{
		"networks.vpn": {Name: "networks.vpn", Type: "network", Config: map[string]any{"value": "n"}},
	}
	for i := range k {
		name := "services.s" + string(rune('a'+i))
		want[name] = &plan.Resource{Name: name, Type: "payload", Config: map[string]any{"value": name}, DependsOn: []string{"networks.vpn"}}
	}
	ad := &estimating{Adapter: memadapter.New(), b: newBarrier(k), ok: true}
	e := &Engine{Adapters: ad, Store: state.NewMemoryStore(), Parallelism: 10}
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: want, PlanOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if out.Plan.Summary.Create != k+1 {
		t.Fatalf("plan %+v, want %d creates", out.Plan.Summary, k+1)
	}
	if !ad.ok {
		t.Fatalf("the %d payloads' state calls were not all in flight at once", k)
	}
}

// slowCompact is a store whose Compact waits at a barrier.
type slowCompact struct {
	state.Store
	b  *barrier
	ok bool
}

func (s *slowCompact) Compact(ctx context.Context, l *state.Lock) error {
	s.ok = s.b.wait()
	return s.Store.Compact(ctx, l)
}

func TestServersStopWhileTheStateIsCompacted(t *testing.T) {
	b := newBarrier(2)
	st := &slowCompact{Store: state.NewMemoryStore(), b: b}
	releaseOK := false
	e := &Engine{Adapters: memadapter.New(), Store: st, Parallelism: 4,
		Release: func(context.Context) error { releaseOK = b.wait(); return nil }}
	if _, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: chain()}); err != nil {
		t.Fatal(err)
	}
	if !st.ok || !releaseOK {
		t.Fatalf("the compaction and the release did not run at once (compact %v, release %v)", st.ok, releaseOK)
	}
}
