package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// world is an in-process adapter for the logic tests: rented instances
// that can die behind gcompose's back, priced, counted. The engine, the
// planner and the state store around it are the real ones.
type world struct {
	mu        sync.Mutex
	next      int
	instances map[string]*instance // by id
	rentals   int
	price     float64 // per hour, for new rentals
	// failCreates fails that many creates; blockFirst, when set, holds the
	// next create until it is closed (and entered is told it started).
	failCreates, failUpdates int
	blockFirst               chan struct{}
	entered                  chan string
	// failWith, when set, is what a failing create says.
	failWith string
	// golemLike makes it behave as golem-service does: an instance keeps
	// the address planned for its resource when it is rented again, and a
	// config change is a rebuild (a rental cannot be changed in place).
	golemLike bool
	// spent, when set, is what every live instance reports it has cost
	// (protocol.Spent, in testCurrency).
	spent string
}

// testCurrency is what the world's costs are in: any currency an adapter
// reports, none that gcompose knows.
const testCurrency = "EUR"

type instance struct {
	id, name, ip string
	alive        bool
	cfg          map[string]any
	price        float64
}

const fakeType = "test/fake:1"

func newWorld() *world { return &world{instances: map[string]*instance{}, price: 0.01} }

func (w *world) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	return plan.Capabilities{Destroy: true, Estimate: true}, nil
}

func (w *world) Sweep(ctx context.Context, s plan.SweepCall) (*protocol.SweepResult, error) {
	return nil, plan.ErrNoSweep
}

func (w *world) Check(ctx context.Context, c plan.CheckCall) (*protocol.CheckResult, error) {
	return nil, plan.ErrNoCheck
}

func (w *world) estimate() *protocol.Cost {
	return &protocol.Cost{Currency: testCurrency, PerHour: w.price, Hours: 3, Total: 3 * w.price, Basis: protocol.CostMarket}
}

func idOf(p *protocol.Persisted) string {
	if p == nil {
		return ""
	}
	id, _ := p.Identity["id"].(string)
	return id
}

func (w *world) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inst := w.instances[idOf(c.Persisted)]
	live := inst != nil && inst.alive
	if desired == protocol.Absent {
		if live {
			return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}},
				Gcompose: &protocol.StateExt{Change: protocol.ChangeDelete}}, nil
		}
		return &protocol.StateResult{Status: protocol.Valid}, nil
	}
	if c.Estimate || !live {
		ext := &protocol.StateExt{Change: protocol.ChangeCreate, Cost: w.estimate()}
		actions := []protocol.ActionSpec{{Name: "create"}}
		if c.Persisted != nil && idOf(c.Persisted) != "" {
			ext.Change, ext.Reason = protocol.ChangeRebuild, "its instance died: renting again"
			actions = []protocol.ActionSpec{{Name: "delete"}, {Name: "create"}}
		}
		return &protocol.StateResult{Status: protocol.Stale, Actions: actions, Gcompose: ext}, nil
	}
	if !jsonvalue.Equal(inst.cfg, c.Config) && w.golemLike {
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}, {Name: "create"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeRebuild, Reason: "config changed: renting again"}}, nil
	}
	if !jsonvalue.Equal(inst.cfg, c.Config) {
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "update"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeUpdate, Reason: "config changed"}}, nil
	}
	ext := &protocol.StateExt{Cost: &protocol.Cost{Currency: testCurrency, PerHour: inst.price, Hours: 3, Total: 3 * inst.price, Basis: protocol.CostAgreed}}
	if w.spent != "" {
		ext.Spent = &protocol.Spent{Amount: w.spent, Currency: testCurrency}
	}
	return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"ip": inst.ip}, Gcompose: ext}, nil
}

func (w *world) Action(ctx context.Context, c plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	switch a.Name {
	case "create":
		w.mu.Lock()
		block, entered := w.blockFirst, w.entered
		w.blockFirst = nil
		w.mu.Unlock()
		if block != nil {
			if entered != nil {
				entered <- c.Name
			}
			select {
			case <-block:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.failCreates > 0 {
			w.failCreates--
			if w.failWith != "" {
				return nil, errors.New(w.failWith)
			}
			return nil, fmt.Errorf("no provider would take %s", c.Name)
		}
		w.next++
		w.rentals++
		ip := fmt.Sprintf("10.0.0.%d", w.next)
		if w.golemLike {
			ip = "10.1.0." + strconv.Itoa(len(c.Name))
		}
		inst := &instance{id: fmt.Sprintf("i-%d", w.next), name: c.Name, ip: ip, alive: true, cfg: maps.Clone(c.Config), price: w.price}
		w.instances[inst.id] = inst
		return &plan.ActionOutcome{Identity: map[string]any{"id": inst.id}}, nil
	case "delete":
		w.mu.Lock()
		defer w.mu.Unlock()
		if inst := w.instances[idOf(c.Persisted)]; inst != nil {
			inst.alive = false
		}
		return &plan.ActionOutcome{}, nil
	case "update":
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.failUpdates > 0 {
			w.failUpdates--
			return nil, fmt.Errorf("%s cannot be changed now", c.Name)
		}
		if inst := w.instances[idOf(c.Persisted)]; inst != nil {
			inst.cfg = maps.Clone(c.Config)
		}
		return &plan.ActionOutcome{}, nil
	}
	return nil, fmt.Errorf("unknown action %s", a.Name)
}

// kill makes the live instance of a resource die behind gcompose's back.
func (w *world) kill(t testing.TB, name string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, i := range w.instances {
		if i.name == name && i.alive {
			i.alive = false
			return
		}
	}
	t.Fatalf("no live instance of %s", name)
}

// live is the id of the live instance of a resource ("" when none).
func (w *world) live(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, i := range w.instances {
		if i.name == name && i.alive {
			return i.id
		}
	}
	return ""
}

func (w *world) rented() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rentals
}

// testApp: db, web reading db's address, and other, which depends on
// nothing.
func testIntent() *Intent {
	return &Intent{App: "shop", Desired: map[string]*plan.Resource{
		"resources.db":    {Name: "resources.db", Type: fakeType, Config: map[string]any{"size": 1}},
		"resources.web":   {Name: "resources.web", Type: fakeType, Config: map[string]any{"db": "${resources.db.state.ip}"}, DependsOn: []string{"resources.db"}},
		"resources.other": {Name: "resources.other", Type: fakeType, Config: map[string]any{"x": "y"}},
	}}
}

// testSession runs the real engine on a store with the world's adapters.
type testSession struct {
	intent *Intent
	e      *engine.Engine
}

func (s *testSession) Intent() *Intent { return s.intent }
func (s *testSession) Close() error    { return nil }
func (s *testSession) Run(ctx context.Context, req engine.Request) (*engine.Outcome, error) {
	return s.e.Run(ctx, req)
}

// bed is a deployed test application: a store, the world, the intent the
// next session loads.
type bed struct {
	t      testing.TB
	store  state.Store
	w      *world
	mu     sync.Mutex
	intent *Intent
	opens  int
	// lockTimeout is the engine's (5s when newBed made it).
	lockTimeout time.Duration
}

func newBed(t testing.TB, store state.Store) *bed {
	t.Helper()
	return newBedOf(t, store, newWorld())
}

// newBedOf deploys the test application in w.
func newBedOf(t testing.TB, store state.Store, w *world) *bed {
	t.Helper()
	b := &bed{t: t, store: store, w: w, intent: testIntent(), lockTimeout: 5 * time.Second}
	if _, err := b.engine().Run(context.Background(), engine.Request{App: "shop", Mode: plan.Deploy, Desired: b.intent.Desired}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return b
}

// sharing is the same application seen through another store: another
// process's view of the same world.
func (b *bed) sharing(store state.Store) *bed {
	return &bed{t: b.t, store: store, w: b.w, intent: b.intent, lockTimeout: b.lockTimeout}
}

func (b *bed) engine() *engine.Engine {
	return &engine.Engine{Adapters: b.w, Store: b.store, Parallelism: 4, LockTimeout: b.lockTimeout}
}

func (b *bed) setIntent(in *Intent) {
	b.mu.Lock()
	b.intent = in
	b.mu.Unlock()
}

func (b *bed) open(ctx context.Context) (Session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opens++
	return &testSession{intent: b.intent, e: b.engine()}, nil
}

func (b *bed) reconciler(cfg Config) *Reconciler {
	b.t.Helper()
	cfg.App = "shop"
	cfg.Open = b.open
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Redactor == nil {
		cfg.Redactor = secret.NewRedactor()
	}
	if cfg.Backoff.Interval == 0 {
		cfg.Backoff = Backoff{Interval: 10 * time.Millisecond, Max: 80 * time.Millisecond, Jitter: 0.2}
	}
	r, err := New(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	return r
}
