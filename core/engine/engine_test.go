package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// diamond: d depends on b and c, which depend on a; b reads a's output.
func diamond(aValue string) map[string]*plan.Resource {
	return map[string]*plan.Resource{
		"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": aValue}},
		"resources.b": {Name: "resources.b", Type: "mem", Config: map[string]any{"from_a": "${resources.a.state.value}"}, DependsOn: []string{"resources.a"}},
		"resources.c": {Name: "resources.c", Type: "mem", Config: map[string]any{"value": "c"}, DependsOn: []string{"resources.a"}},
		"resources.d": {Name: "resources.d", Type: "mem", Config: map[string]any{"value": "d"}, DependsOn: []string{"resources.b", "resources.c"}},
	}
}

func newEngine(t *testing.T, ad *memadapter.Adapter) (*Engine, state.Store) {
	t.Helper()
	st := state.NewMemoryStore()
	return &Engine{Adapters: ad, Store: st, Parallelism: 4}, st
}

func deploy(t *testing.T, e *Engine, desired map[string]*plan.Resource) *Outcome {
	t.Helper()
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: desired})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	return out
}

func indexOf(log []string, s string) int { return slices.Index(log, s) }

func TestDeployInDependencyOrderThenNoop(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	out := deploy(t, e, diamond("v1"))
	if got := out.Plan.Summary.Create; got != 4 {
		t.Fatalf("plan creates %d, want 4", got)
	}
	log := ad.Log()
	for _, pair := range [][2]string{{"create resources.a", "create resources.b"}, {"create resources.a", "create resources.c"}, {"create resources.b", "create resources.d"}, {"create resources.c", "create resources.d"}} {
		if indexOf(log, pair[0]) < 0 || indexOf(log, pair[0]) > indexOf(log, pair[1]) {
			t.Fatalf("%q must come before %q; log %v", pair[0], pair[1], log)
		}
	}
	if got := ad.Objects()["resources.b"]["from_a"]; got != "v1" {
		t.Fatalf("b's reference resolved to %v, want v1", got)
	}
	doc, _ := st.Load(context.Background(), "app")
	for name, r := range doc.Resources {
		if r.Status != state.StatusActive || r.Pending != nil {
			t.Fatalf("%s: status %s pending %v, want Active and nothing pending", name, r.Status, r.Pending)
		}
	}
	actions := ad.ActionCalls.Load()
	out = deploy(t, e, diamond("v1"))
	if out.Plan.HasChanges() {
		t.Fatalf("second plan has changes: %+v", out.Plan.Summary)
	}
	if ad.ActionCalls.Load() != actions {
		t.Fatalf("re-deploy ran %d actions, want none", ad.ActionCalls.Load()-actions)
	}
	if n := ad.StateCalls.Load(); n != 4+4+4 { // deploy: plan + verify; re-deploy: plan only
		t.Fatalf("state calls = %d, want 12 (nothing asked twice for one answer)", n)
	}
}

func TestConfigChangeUpdatesAndKnocksOn(t *testing.T) {
	ad := memadapter.New()
	e, _ := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	before := len(ad.Log())
	out := deploy(t, e, diamond("v2"))
	a, b, c := out.Plan.Step("resources.a"), out.Plan.Step("resources.b"), out.Plan.Step("resources.c")
	if a.Op != plan.Update || b.Op != plan.Update || !b.KnownAfterApply || c.Op != plan.NoOp {
		t.Fatalf("plan: a %s, b %s (known after apply %v), c %s; want update, knock-on update, noop", a.Op, b.Op, b.KnownAfterApply, c.Op)
	}
	if !strings.Contains(b.Reason, "${resources.a.state.value}") {
		t.Fatalf("knock-on reason %q does not name the reference", b.Reason)
	}
	got := ad.Log()[before:]
	want := []string{"update resources.a", "update resources.b"}
	if !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	if v := ad.Objects()["resources.b"]["from_a"]; v != "v2" {
		t.Fatalf("b got %v, want v2", v)
	}
}

func TestRebuildForcedByField(t *testing.T) {
	ad := memadapter.New()
	ad.Rebuild = []string{"value"}
	e, _ := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	out := deploy(t, e, diamond("v2"))
	a := out.Plan.Step("resources.a")
	if a.Op != plan.Rebuild || !slices.Equal(a.Forces, []string{"/value"}) {
		t.Fatalf("a: %s forces %v, want rebuild forced by /value", a.Op, a.Forces)
	}
}

func TestDestroyInReverseOrder(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	before := len(ad.Log())
	if _, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Destroy}); err != nil {
		t.Fatal(err)
	}
	log := ad.Log()[before:]
	if len(ad.Objects()) != 0 {
		t.Fatalf("left behind: %v", ad.Objects())
	}
	if indexOf(log, "delete resources.d") > indexOf(log, "delete resources.b") || indexOf(log, "delete resources.b") > indexOf(log, "delete resources.a") {
		t.Fatalf("destroy order %v: dependents must go first", log)
	}
	doc, _ := st.Load(context.Background(), "app")
	if len(doc.Resources) != 0 {
		t.Fatalf("state still holds %v", doc.Names())
	}
}

func TestFailureStopsOnlyDependents(t *testing.T) {
	ad := memadapter.New()
	ad.FailActions = map[string]bool{"resources.b": true}
	e, st := newEngine(t, ad)
	_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
	var failed *apply.FailedError
	if !errors.As(err, &failed) {
		t.Fatalf("err = %v, want a FailedError", err)
	}
	var names []string
	for _, o := range failed.Outcomes {
		names = append(names, o.Resource)
	}
	if !slices.Equal(names, []string{"resources.b", "resources.d"}) {
		t.Fatalf("failed %v, want b (failed) and d (skipped)", names)
	}
	if !strings.Contains(err.Error(), "failed on purpose") || !strings.Contains(err.Error(), "resources.b failed") {
		t.Fatalf("error does not say why: %v", err)
	}
	objs := ad.Objects()
	if objs["resources.a"] == nil || objs["resources.c"] == nil || objs["resources.d"] != nil {
		t.Fatalf("objects %v: a and c must exist, d must not", objs)
	}
	doc, _ := st.Load(context.Background(), "app")
	if r := doc.Resources["resources.b"]; r == nil || r.Status != state.StatusPending || r.Pending == nil {
		t.Fatalf("b in state = %+v, want Pending with its operation recorded", r)
	}
	// Fixed, the next deploy finishes the rest.
	ad.FailActions = nil
	out := deploy(t, e, diamond("v1"))
	if s := out.Plan.Summary; s.Create != 2 {
		t.Fatalf("recovery plan %+v, want b and d created", s)
	}
}

func TestRemovedResourceIsDeletedAndDriftIsRebuilt(t *testing.T) {
	ad := memadapter.New()
	e, _ := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	ad.Remove("resources.a") // behind gcompose's back
	want := diamond("v1")
	delete(want, "resources.d")
	out := deploy(t, e, want)
	if s := out.Plan.Step("resources.d"); s.Op != plan.Delete {
		t.Fatalf("d: %s, want delete", s.Op)
	}
	if s := out.Plan.Step("resources.a"); s.Op != plan.Create || s.Drift != "gone" {
		t.Fatalf("a: %s drift %q, want create of a gone resource", s.Op, s.Drift)
	}
	if s := out.Plan.Step("resources.b"); !s.KnownAfterApply {
		t.Fatalf("b must be a knock-on of a's recreation")
	}
	if s := out.Plan.Step("resources.c"); s.Op != plan.NoOp {
		t.Fatalf("c: %s, want untouched", s.Op)
	}
	objs := ad.Objects()
	if objs["resources.a"] == nil || objs["resources.d"] != nil {
		t.Fatalf("objects after converge: %v", objs)
	}
}

func TestPlainAdapterIsForgottenOnDestroy(t *testing.T) {
	ad := memadapter.New()
	ad.Plain = true
	e, st := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Destroy})
	if err != nil {
		t.Fatal(err)
	}
	if out.Plan.Summary.Forget != 4 {
		t.Fatalf("plan %+v, want 4 forgotten", out.Plan.Summary)
	}
	doc, _ := st.Load(context.Background(), "app")
	if len(doc.Resources) != 0 {
		t.Fatal("state not emptied")
	}
}

func TestSecondRunIsRefusedByTheLock(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	lock, err := st.Lock(context.Background(), "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
	if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), lock.Info.ID) {
		t.Fatalf("err = %v, want a lock error naming lock %s", err, lock.Info.ID)
	}
	if len(ad.Objects()) != 0 {
		t.Fatal("a refused run changed something")
	}
}

func TestAppIDIsTheStateLineage(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	want := map[string]*plan.Resource{"resources.x": {Name: "resources.x", Type: "mem", Config: map[string]any{"label": "app-${app.id}"}}}
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: want, PlanOnly: true})
	if err != nil || !out.Plan.Step("resources.x").KnownAfterApply {
		t.Fatalf("plan of a new app: err %v; ${app.id} must be known after apply", err)
	}
	deploy(t, e, want)
	doc, _ := st.Load(context.Background(), "app")
	if got := ad.Objects()["resources.x"]["label"]; doc.Lineage == "" || got != "app-"+doc.Lineage {
		t.Fatalf("label = %v, want app-%s", got, doc.Lineage)
	}
	if out := deploy(t, e, want); out.Plan.HasChanges() {
		t.Fatal("${app.id} changed between runs")
	}
}

func TestPlanFailureHoldsBackOnlyDependents(t *testing.T) {
	ad := memadapter.New()
	ad.FailState = map[string]bool{"resources.c": true}
	e, _ := newEngine(t, ad)
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
	if err == nil {
		t.Fatal("a deploy with a resource that cannot be planned succeeded")
	}
	if s := out.Plan.Step("resources.c"); s.Op != plan.Failed || !strings.Contains(s.Error, "broken on purpose") {
		t.Fatalf("c: %s %q, want a failed step saying why", s.Op, s.Error)
	}
	if s := out.Plan.Step("resources.d"); s == nil || s.Op != plan.Failed {
		t.Fatalf("d depends on c: want a failed step, got %+v", s)
	}
	objs := ad.Objects()
	if objs["resources.a"] == nil || objs["resources.b"] == nil || objs["resources.d"] != nil {
		t.Fatalf("objects %v: a and b (independent of c) must be applied, d must not", objs)
	}
	if n := strings.Count(err.Error(), "resources.c: resources.c"); n != 0 {
		t.Fatalf("resource named twice: %v", err)
	}
}

// recordChecker checks, at every call, what the adapter is told against the
// store: an action's operation is the resource's pending operation, already
// durable; every call carries the state's lineage; a state call carries the
// pending operation the store holds.
type recordChecker struct {
	plan.Adapters
	t       *testing.T
	store   state.Store
	mu      sync.Mutex // actions run in parallel
	ops     []string
	reports int
}

func (c *recordChecker) check(call plan.Call) *state.Document {
	doc, err := c.store.Load(context.Background(), call.App)
	if err != nil {
		c.t.Errorf("load: %v", err)
		return doc
	}
	if call.Lineage == "" || call.Lineage != doc.Lineage {
		c.t.Errorf("%s: call lineage %q, state lineage %q", call.Name, call.Lineage, doc.Lineage)
	}
	return doc
}

func (c *recordChecker) State(ctx context.Context, call plan.Call, desired string) (*protocol.StateResult, error) {
	doc := c.check(call)
	var want *protocol.Operation
	if r := doc.Resources[call.Name]; r != nil {
		want = plan.OperationOf(r.Pending)
	}
	var got *protocol.Operation
	if call.Persisted != nil {
		got = call.Persisted.Pending
	}
	if (got == nil) != (want == nil) || (got != nil && got.ID != want.ID) {
		c.t.Errorf("%s: state call told pending %+v, the store holds %+v", call.Name, got, want)
	}
	return c.Adapters.State(ctx, call, desired)
}

func (c *recordChecker) Action(ctx context.Context, call plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	doc := c.check(call)
	r := doc.Resources[call.Name]
	switch {
	case call.Operation == nil:
		c.t.Errorf("%s: action %s without an operation", call.Name, a.Name)
	case r == nil || r.Pending == nil || r.Pending.ID != call.Operation.ID:
		c.t.Errorf("%s: action %s with operation %s, not the pending one the store holds (%+v)", call.Name, a.Name, call.Operation.ID, r)
	case call.Operation.Kind != string(r.Pending.Kind) || call.Operation.Action != a.Name:
		c.t.Errorf("%s: operation %+v does not describe the action %s", call.Name, call.Operation, a.Name)
	case call.Persisted == nil || call.Persisted.Pending != nil:
		c.t.Errorf("%s: an action call repeats its operation as persisted.pending", call.Name)
	default:
		c.mu.Lock()
		c.ops = append(c.ops, call.Operation.ID)
		c.mu.Unlock()
	}
	// An identity report is durable by the time the report returns, while
	// the action still runs.
	if report := call.ReportIdentity; report != nil {
		call.ReportIdentity = func(identity map[string]any) {
			report(identity)
			c.mu.Lock()
			c.reports++
			c.mu.Unlock()
			doc := c.check(call)
			if r := doc.Resources[call.Name]; r == nil || !jsonvalue.Equal(r.Identity["id"], identity["id"]) {
				c.t.Errorf("%s: identity %v reported, the store holds %+v", call.Name, identity, r)
			}
		}
	}
	return c.Adapters.Action(ctx, call, a, stale)
}

func TestActionsCarryTheirDurableOperation(t *testing.T) {
	ad := memadapter.New()
	e, st := newEngine(t, ad)
	rc := &recordChecker{Adapters: ad, t: t, store: st}
	e.Adapters = rc
	deploy(t, e, diamond("v1"))
	deploy(t, e, diamond("v2"))
	if _, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Destroy}); err != nil {
		t.Fatal(err)
	}
	if len(rc.ops) != 4+2+4 { // create all, update a and b (knock-on), delete all
		t.Fatalf("%d actions checked, want 10", len(rc.ops))
	}
	if rc.reports != 6 { // creates and updates report
		t.Fatalf("%d identity reports checked, want 6", rc.reports)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(rc.ops)))) != len(rc.ops) {
		t.Fatalf("operation IDs reused: %v", rc.ops)
	}
}

// forgetInState drops a resource from the state behind the engine's back,
// as a run killed between a remote create and its record would leave it.
func forgetInState(t *testing.T, st state.Store, name string) {
	t.Helper()
	ctx := context.Background()
	lock, err := st.Lock(ctx, "app", state.NewLockInfo("test", "test"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Unlock(ctx, lock)
	if err := st.Apply(ctx, lock, state.Delete(name)); err != nil {
		t.Fatal(err)
	}
}

func TestSweepTerminatesWhatNoStateNames(t *testing.T) {
	ad := memadapter.New()
	ad.Sweeps = true
	e, st := newEngine(t, ad)
	var events []apply.Event
	e.Observer = func(ev apply.Event) {
		if ev.Phase == apply.PhaseSwept {
			events = append(events, ev)
		}
	}
	out := deploy(t, e, diamond("v1"))
	if len(out.Swept) != 0 || ad.SweepCalls.Load() != 1 {
		t.Fatalf("first deploy: swept %+v in %d calls, want nothing in 1 (one adapter type)", out.Swept, ad.SweepCalls.Load())
	}
	forgetInState(t, st, "resources.d")

	// plan only reports.
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), PlanOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Swept) != 1 || out.Swept[0].Terminated() || out.Swept[0].ID != "resources.d" || ad.Objects()["resources.d"] == nil {
		t.Fatalf("plan: swept %+v; the object must only be reported", out.Swept)
	}
	// The plan deletes it as a leftover step, saying why it is ours, and
	// makes d anew (its adapter would have adopted the leftover).
	if s := out.Plan.Step("leftovers.object.resources.d"); s == nil || s.Op != plan.Delete || !strings.Contains(s.Reason, "made for d") || !strings.Contains(s.Reason, "lineage "+out.Lineage) {
		t.Fatalf("plan: leftover step %+v, want a delete saying why it is ours", s)
	}
	if s := out.Plan.Step("resources.d"); s.Op != plan.Create || s.Answer != nil {
		t.Fatalf("plan: d %s (answer %v), want a create asked again after the deletion", s.Op, s.Answer)
	}
	// A declined deploy changes nothing: the leftover stays.
	if _, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), Confirm: func(*plan.Plan) (bool, error) { return false, nil }}); !errors.Is(err, ErrDeclined) {
		t.Fatalf("declined deploy: %v", err)
	}
	if ad.Objects()["resources.d"] == nil || slices.Contains(ad.Log(), "sweep resources.d") {
		t.Fatalf("a declined deploy terminated the leftover: %v", ad.Log())
	}
	// deploy terminates it once approved, then creates d again: once.
	out = deploy(t, e, diamond("v1"))
	if len(out.Swept) != 1 || out.Swept[0].Type != "mem" {
		t.Fatalf("deploy: swept %+v", out.Swept)
	}
	log := strings.Join(ad.Log(), ",")
	if !strings.HasSuffix(log, "sweep resources.d,create resources.d") {
		t.Fatalf("log %s: want the orphan terminated, then d created again", log)
	}
	if len(events) != 0 {
		t.Fatalf("swept events %+v: a leftover the plan deletes is a step, not a note", events)
	}
	if out = deploy(t, e, diamond("v1")); out.Plan.HasChanges() || len(out.Swept) != 0 {
		t.Fatalf("not converged: %+v swept %+v", out.Plan.Summary, out.Swept)
	}
}

func TestSweepSparesPendingAndOtherLineages(t *testing.T) {
	ad := memadapter.New()
	ad.Sweeps = true
	e, st := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	// Another state of the same app (another lineage) made "resources.x":
	// its first deploy finds the objects of the first state and needs
	// --force-new-state to go ahead.
	other := &Engine{Adapters: ad, Store: state.NewMemoryStore()}
	x := map[string]*plan.Resource{"resources.x": {Name: "resources.x", Type: "mem", Config: map[string]any{}}}
	if _, err := other.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: x}); !errors.As(err, new(*ExistingError)) {
		t.Fatalf("a first deploy next to another state's objects: %v", err)
	}
	if _, err := other.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: x, ForceNewState: true}); err != nil {
		t.Fatal(err)
	}
	// A create of resources.a was recorded as pending and never finished.
	ctx := context.Background()
	lock, err := st.Lock(ctx, "app", state.NewLockInfo("test", "test"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := st.Load(ctx, "app")
	a := doc.Resources["resources.a"]
	a.Identity = nil
	a.Pending = &state.Operation{ID: "op-a", Kind: state.OpCreate}
	if err := st.Apply(ctx, lock, state.Put(a)); err != nil {
		t.Fatal(err)
	}
	st.Unlock(ctx, lock)
	ad.Tag("resources.a", doc.Lineage, "op-a")

	out := deploy(t, e, diamond("v1"))
	if len(out.Swept) != 1 || out.Swept[0].ID != "resources.x" || out.Swept[0].Terminated() {
		t.Fatalf("swept %+v: want only resources.x, reported", out.Swept)
	}
	if got := out.Swept[0].Describe(out.Lineage); !strings.Contains(got, "of another state of this app (lineage ") {
		t.Fatalf("describe: %s", got)
	}
	if ad.Objects()["resources.a"] == nil || ad.Objects()["resources.x"] == nil {
		t.Fatal("the sweep removed an object of a pending operation or of another lineage")
	}
}

func TestFailingSweepStopsTheRunBeforePlanning(t *testing.T) {
	ad := memadapter.New()
	ad.Sweeps = true
	e, _ := newEngine(t, ad)
	deploy(t, e, diamond("v1"))
	ad.FailSweep = true
	states := ad.StateCalls.Load()
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Destroy})
	var se *SweepError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "nothing was planned") || out.Plan != nil {
		t.Fatalf("destroy with a failing sweep: %v (plan %v)", err, out.Plan)
	}
	if ad.StateCalls.Load() != states || len(ad.Objects()) != 4 {
		t.Fatal("a failing sweep let the run plan or change something")
	}
}

// TestInterruptLetsActionsUnderWayFinish: a first interrupt while a's
// create runs lets it finish and be recorded; nothing else starts; the
// next deploy does the rest, creating each resource once.
func TestInterruptLetsActionsUnderWayFinish(t *testing.T) {
	ad := memadapter.New()
	ad.ActionDelay = 200 * time.Millisecond
	e, st := newEngine(t, ad)
	stop, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var phases []string
	var mu sync.Mutex
	e.Observer = func(ev apply.Event) {
		mu.Lock()
		defer mu.Unlock()
		phases = append(phases, ev.Resource+" "+string(ev.Phase))
		if ev.Phase == apply.PhaseAction {
			interrupt() // Ctrl-C while the first action runs
		}
	}
	out, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), Stop: stop})
	var ie *apply.InterruptedError
	if !errors.As(err, &ie) || ie.Aborted || !errors.Is(err, apply.ErrInterrupted) {
		t.Fatalf("want an interruption, got %v", err)
	}
	if got := strings.Join(ad.Log(), ","); got != "create resources.a" {
		t.Fatalf("actions %s: want only a's create, finished", got)
	}
	if msg := err.Error(); msg != "interrupted: 1 resource(s) finished what they had started (resources.a); 3 not started (resources.b, resources.c, resources.d)" {
		t.Fatalf("message %q", msg)
	}
	if o := out.Result.Outcomes["resources.b"]; o == nil || !errors.Is(o.Err, apply.ErrInterrupted) {
		t.Fatalf("b's outcome %+v", o)
	}
	doc, _ := st.Load(context.Background(), "app")
	if a := doc.Resources["resources.a"]; a == nil || a.Status != state.StatusActive || a.Pending != nil {
		t.Fatalf("a not recorded as done: %+v", a)
	}
	deploy(t, e, diamond("v1"))
	for _, n := range []string{"a", "b", "c", "d"} {
		if c := strings.Count(strings.Join(ad.Log(), ","), "create resources."+n); c != 1 {
			t.Fatalf("%s created %d times: %v", n, c, ad.Log())
		}
	}
}

// TestSecondInterruptAborts: an abort cuts the action under way short; its
// operation stays pending and the next deploy resolves it.
func TestSecondInterruptAborts(t *testing.T) {
	ad := memadapter.New()
	ad.ActionDelay = time.Minute
	e, st := newEngine(t, ad)
	stop, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	ctx, abort := context.WithCancelCause(context.Background())
	e.Observer = func(ev apply.Event) {
		if ev.Phase == apply.PhaseAction {
			interrupt()
			abort(apply.ErrAborted)
		}
	}
	start := time.Now()
	out, err := e.Run(ctx, Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), Stop: stop})
	var ie *apply.InterruptedError
	if !errors.As(err, &ie) || !ie.Aborted || time.Since(start) > 30*time.Second {
		t.Fatalf("want an abort at once, got %v after %s", err, time.Since(start))
	}
	var ae *apply.AbortedError
	if o := out.Result.Outcomes["resources.a"]; o == nil || !errors.As(o.Err, &ae) || ae.Operation.Kind != state.OpCreate {
		t.Fatalf("a's outcome %+v", o)
	}
	if strings.Contains(err.Error(), "context canceled") || !strings.Contains(err.Error(), "interrupted and aborted: 1 action(s) cut short (resources.a)") {
		t.Fatalf("message %q", err)
	}
	doc, _ := st.Load(context.Background(), "app")
	if a := doc.Resources["resources.a"]; a == nil || a.Pending == nil || a.Pending.ID != ae.Operation.ID {
		t.Fatalf("a's operation not left pending: %+v", a)
	}
	ad.ActionDelay = 0
	e.Observer = nil
	out = deploy(t, e, diamond("v1"))
	if len(out.Pending) != 1 || len(ad.Objects()) != 4 {
		t.Fatalf("next deploy: pending %v, objects %d", out.Pending, len(ad.Objects()))
	}
}

// TestInterruptBeforeApplyChangesNothing: an interrupt while planning
// stops the run before anything is applied.
func TestInterruptBeforeApplyChangesNothing(t *testing.T) {
	ad := memadapter.New()
	e, _ := newEngine(t, ad)
	stop, interrupt := context.WithCancel(context.Background())
	interrupt()
	_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1"), Stop: stop})
	if !errors.Is(err, apply.ErrInterrupted) || err.Error() != "interrupted: nothing was changed" || len(ad.Log()) != 0 {
		t.Fatalf("got %v, actions %v", err, ad.Log())
	}
}

// A deploy whose plan an adapter refuses (gcompose.refuse) changes
// nothing, not even the resources independent of the refused one.
func TestRefusedPlanDeploysNothing(t *testing.T) {
	ad := memadapter.New()
	ad.Refuse = map[string]string{"resources.c": "no offer within the caps"}
	e, _ := newEngine(t, ad)
	_, err := e.Run(context.Background(), Request{App: "app", Mode: plan.Deploy, Desired: diamond("v1")})
	if err == nil || !strings.Contains(err.Error(), "resources.c: refused by its adapter mem: no offer within the caps") ||
		!strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("deploy error %v, want c refused and nothing changed", err)
	}
	if log := ad.Log(); len(log) != 0 {
		t.Fatalf("a refused plan ran actions: %v", log)
	}
}
