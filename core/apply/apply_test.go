package apply_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// docStore is a Persister writing into one document, so that a test can
// plan the next run against what the last one recorded.
type docStore struct {
	mu  sync.Mutex
	doc *state.Document
}

func (d *docStore) Put(_ context.Context, r *state.Resource) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.doc.Resources[r.Name] = r.Clone()
	d.doc.Serial++
	return nil
}

func (d *docStore) Remove(_ context.Context, name string, _ *state.Spent) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.doc.Resources, name)
	d.doc.Serial++
	return nil
}

func (d *docStore) snapshot() *state.Document {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := state.NewDocument(d.doc.App)
	out.Lineage, out.Serial = d.doc.Lineage, d.doc.Serial
	for n, r := range d.doc.Resources {
		out.Resources[n] = r.Clone()
	}
	return out
}

// diamond: d depends on b and c, which depend on a; b reads a's output.
func diamond(aValue string) map[string]*plan.Resource {
	return map[string]*plan.Resource{
		"resources.a": {Name: "resources.a", Type: "mem", Config: map[string]any{"value": aValue}},
		"resources.b": {Name: "resources.b", Type: "mem", Config: map[string]any{"from_a": "${resources.a.state.value}"}, DependsOn: []string{"resources.a"}},
		"resources.c": {Name: "resources.c", Type: "mem", Config: map[string]any{"value": "c"}, DependsOn: []string{"resources.a"}},
		"resources.d": {Name: "resources.d", Type: "mem", Config: map[string]any{"value": "d"}, DependsOn: []string{"resources.b", "resources.c"}},
	}
}

type fixture struct {
	ad    *memadapter.Adapter
	store *docStore
}

func newFixture() *fixture {
	doc := state.NewDocument("app")
	doc.Lineage = "lineage-1"
	return &fixture{ad: memadapter.New(), store: &docStore{doc: doc}}
}

func (f *fixture) plan(t *testing.T, mode plan.Mode, want map[string]*plan.Resource) *plan.Plan {
	t.Helper()
	p := &plan.Planner{Adapters: f.ad, Walk: engine.GraphWalk(4)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: mode, Desired: want, State: f.store.snapshot()})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return pl
}

func (f *fixture) apply(pl *plan.Plan, recheck bool) (*apply.Result, error) {
	ex := &apply.Executor{Adapters: f.ad, Store: f.store, Walk: engine.GraphWalk(4), Recheck: recheck}
	return ex.Apply(context.Background(), pl)
}

func (f *fixture) deploy(t *testing.T, want map[string]*plan.Resource) {
	t.Helper()
	if _, err := f.apply(f.plan(t, plan.Deploy, want), false); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// generations records each object's generation, bumped by every action
// that makes or changes it: an unchanged generation means untouched.
func generations(ad *memadapter.Adapter) map[string]any {
	out := map[string]any{}
	for n, o := range ad.Objects() {
		out[n] = o["generation"]
	}
	return out
}

func inconsistent(t *testing.T, res *apply.Result, name string) *plan.Inconsistent {
	t.Helper()
	o := res.Outcomes[name]
	if o == nil {
		t.Fatalf("%s has no outcome", name)
	}
	var inc *plan.Inconsistent
	if !errors.As(o.Err, &inc) {
		t.Fatalf("%s: error %v, want *plan.Inconsistent", name, o.Err)
	}
	if !strings.Contains(o.Err.Error(), "inconsistent with the approved plan") {
		t.Fatalf("%s: message %q does not say it is inconsistent with the approved plan", name, o.Err)
	}
	return inc
}

func TestApplyCarriesOutThePlanOnly(t *testing.T) {
	f := newFixture()
	pl := f.plan(t, plan.Deploy, diamond("v1"))
	// The plan is apply's only input: it runs without the desired set.
	res, err := f.apply(pl, false)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if len(res.Outcomes) != 4 || len(f.ad.Objects()) != 4 {
		t.Fatalf("outcomes %d, objects %d; want 4 and 4", len(res.Outcomes), len(f.ad.Objects()))
	}
	if got := f.ad.Objects()["resources.b"]["from_a"]; got != "v1" {
		t.Fatalf("b's runtime reference resolved to %v, want v1", got)
	}
	// Within one run, the answers the plan was made from are not asked twice.
	if n := f.ad.StateCalls.Load(); n != 4+4 {
		t.Fatalf("state calls %d, want 8 (plan + verify)", n)
	}
}

// The case: a knock-on planned as an in-place update that the
// adapter, once its inputs are known, wants to rebuild.
func TestKnockOnThatTurnsIntoARebuildIsRefused(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	pl := f.plan(t, plan.Deploy, diamond("v2"))
	if b := pl.Step("resources.b"); b.Op != plan.Update || !b.KnownAfterApply {
		t.Fatalf("b planned %s (known after apply %v), want a knock-on update", b.Op, b.KnownAfterApply)
	}
	before := generations(f.ad)
	f.ad.Rebuild = []string{"from_a"} // the adapter changes its mind after the plan was approved
	res, err := f.apply(pl, false)
	if !apply.IsFailed(err) {
		t.Fatalf("apply error %v, want a failure", err)
	}
	inc := inconsistent(t, res, "resources.b")
	if inc.Approved != plan.Update || inc.Actual != plan.Rebuild {
		t.Fatalf("inconsistency %+v, want approved update, actual rebuild", inc)
	}
	after := generations(f.ad)
	if after["resources.b"] != before["resources.b"] {
		t.Fatalf("b was touched: generation %v -> %v", before["resources.b"], after["resources.b"])
	}
	if o := res.Outcomes["resources.d"]; o == nil || !o.Skipped {
		t.Fatalf("d (depends on b) outcome %+v, want held back", o)
	}
	if after["resources.a"] == before["resources.a"] || f.ad.Objects()["resources.a"]["value"] != "v2" {
		t.Fatalf("a was not updated: %v", f.ad.Objects()["resources.a"])
	}
	if o := res.Outcomes["resources.c"]; o == nil || o.Err != nil {
		t.Fatalf("c (independent of b) outcome %+v, want applied", o)
	}
	if log := f.ad.Log(); slices.Contains(log, "rebuild resources.b") {
		t.Fatalf("b was rebuilt: %v", log)
	}
}

// A knock-on planned with what its adapter says it may become (here a
// rebuild, forced by the field that reads the dependency) is shown as -/+
// and may then be rebuilt.
func TestKnockOnShownAsRebuildMayRebuild(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	f.ad.Rebuild = []string{"from_a"}
	pl := f.plan(t, plan.Deploy, diamond("v2"))
	b := pl.Step("resources.b")
	if b.Op != plan.Rebuild || !slices.Equal(b.Forces, []string{"/from_a"}) {
		t.Fatalf("b planned %s forced by %v, want rebuild forced by /from_a", b.Op, b.Forces)
	}
	if _, err := f.apply(pl, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := f.ad.Objects()["resources.b"]["from_a"]; got != "v2" {
		t.Fatalf("b has from_a %v, want v2", got)
	}
}

// A saved plan is asked again at apply (Recheck): what was approved as no
// change and has since gone must not be recreated behind the user's back,
// and an approved update that became a rebuild is refused too.
func TestRecheckedPlanBindsEveryStep(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	pl := f.plan(t, plan.Deploy, diamond("v2"))
	if a, c := pl.Step("resources.a"), pl.Step("resources.c"); a.Op != plan.Update || c.Op != plan.NoOp {
		t.Fatalf("plan: a %s, c %s; want update, no change", a.Op, c.Op)
	}
	before := generations(f.ad)
	f.ad.Remove("resources.c")
	res, err := f.apply(pl, true)
	if !apply.IsFailed(err) {
		t.Fatalf("apply error %v, want a failure", err)
	}
	if inc := inconsistent(t, res, "resources.c"); inc.Approved != plan.NoOp || inc.Actual != plan.Create {
		t.Fatalf("c: %+v, want approved no change, actual create", inc)
	}
	if _, ok := f.ad.Objects()["resources.c"]; ok {
		t.Fatal("c was recreated although the plan said no change")
	}
	if o := res.Outcomes["resources.d"]; o == nil || !o.Skipped {
		t.Fatalf("d outcome %+v, want held back", o)
	}
	if generations(f.ad)["resources.a"] == before["resources.a"] {
		t.Fatal("a, approved as an update and still one, was not updated")
	}

	// An update that turned into a rebuild between plan and apply.
	g := newFixture()
	g.deploy(t, diamond("v1"))
	pl = g.plan(t, plan.Deploy, diamond("v2"))
	g.ad.Rebuild = []string{"value"}
	before = generations(g.ad)
	res, _ = g.apply(pl, true)
	if inc := inconsistent(t, res, "resources.a"); inc.Approved != plan.Update || inc.Actual != plan.Rebuild || inc.Reason != "config changed" {
		t.Fatalf("a: %+v, want approved update, actual rebuild, the adapter's reason", inc)
	}
	if generations(g.ad)["resources.a"] != before["resources.a"] {
		t.Fatal("a was touched")
	}
	for _, n := range []string{"resources.b", "resources.c", "resources.d"} {
		if o := res.Outcomes[n]; o == nil || !o.Skipped {
			t.Fatalf("%s outcome %+v, want held back (it depends on a)", n, o)
		}
	}
}

// Without Recheck the same drift is not seen at apply (the plan's answer
// is used), which is why saved plans set it.
func TestSameRunUsesThePlansAnswers(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	pl := f.plan(t, plan.Deploy, diamond("v1"))
	calls := f.ad.StateCalls.Load()
	if _, err := f.apply(pl, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if n := f.ad.StateCalls.Load() - calls; n != 0 {
		t.Fatalf("apply of an unchanged plan asked %d state calls, want 0", n)
	}
}

func TestDestroyRefusesWhatWasNotApproved(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	pl := f.plan(t, plan.Destroy, nil)
	if pl.Summary.Delete != 4 {
		t.Fatalf("destroy plan: %+v, want 4 deletes", pl.Summary)
	}
	res, err := f.apply(pl, true)
	if err != nil {
		t.Fatalf("destroy: %v (%v)", err, res)
	}
	if n := len(f.ad.Objects()); n != 0 {
		t.Fatalf("%d objects left after destroy", n)
	}
	if n := len(f.store.snapshot().Resources); n != 0 {
		t.Fatalf("%d resources left in state after destroy", n)
	}
}

func (f *fixture) planWith(t *testing.T, in plan.Input) (*plan.Plan, error) {
	t.Helper()
	in.App, in.State = "app", f.store.snapshot()
	p := &plan.Planner{Adapters: f.ad, Walk: engine.GraphWalk(4)}
	return p.Plan(context.Background(), in)
}

func TestReplaceRebuildsAResourceTheAdapterIsContentWith(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	before := generations(f.ad)
	pl, err := f.planWith(t, plan.Input{Mode: plan.Deploy, Desired: diamond("v1"), Replace: []string{"resources.c"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := pl.Step("resources.c"); c.Op != plan.Rebuild || !c.Replace || !strings.Contains(c.Reason, "--replace") {
		t.Fatalf("c: %s replace %v (%s), want a rebuild asked by --replace", c.Op, c.Replace, c.Reason)
	}
	if _, err := f.apply(pl, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	after := generations(f.ad)
	for n, g := range before {
		if changed := after[n] != g; changed != (n == "resources.c") {
			t.Errorf("%s: generation %v -> %v; only c may change", n, g, after[n])
		}
	}
	if log := f.ad.Log(); !slices.Equal(log[len(log)-2:], []string{"delete resources.c", "create resources.c"}) {
		t.Fatalf("log %v, want c deleted then created", log)
	}
	if _, err := f.planWith(t, plan.Input{Mode: plan.Deploy, Desired: diamond("v1"), Replace: []string{"nosuch"}}); err == nil || !strings.Contains(err.Error(), "--replace nosuch matches no resource") {
		t.Fatalf("--replace of an unknown address: %v", err)
	}
}

func TestTargetLimitsTheRunToWhatItNeeds(t *testing.T) {
	f := newFixture()
	pl, err := f.planWith(t, plan.Input{Mode: plan.Deploy, Desired: diamond("v1"), Targets: []string{"c"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(pl, false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	got := make([]string, 0)
	for n := range f.ad.Objects() {
		got = append(got, n)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"resources.a", "resources.c"}) {
		t.Fatalf("deploy --target c made %v, want c and what it needs (a)", got)
	}
	f.deploy(t, diamond("v1"))

	// destroy --target a takes everything depending on a with it,
	// dependents first; --target d only d.
	pl, err = f.planWith(t, plan.Input{Mode: plan.Destroy, Targets: []string{"resources.d"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.Steps) != 1 || pl.Steps[0].Resource != "resources.d" {
		t.Fatalf("destroy --target d plans %d steps, want d only", len(pl.Steps))
	}
	pl, err = f.planWith(t, plan.Input{Mode: plan.Destroy, Targets: []string{"resources.b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.apply(pl, false); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	log := f.ad.Log()
	if i, j := slices.Index(log, "delete resources.d"), slices.Index(log, "delete resources.b"); i < 0 || j < 0 || i > j {
		t.Fatalf("destroy --target b: log %v, want d (its dependent) deleted before b", log)
	}
	if _, ok := f.ad.Objects()["resources.c"]; !ok {
		t.Fatal("destroy --target b removed c, which does not depend on b")
	}
}

func TestProtectedResourceIsNeitherRebuiltNorDeleted(t *testing.T) {
	f := newFixture()
	f.ad.Rebuild = []string{"value"}
	f.deploy(t, diamond("v1"))
	want := diamond("v1")
	want["resources.c"].Protect = true
	want["resources.c"].Config = map[string]any{"value": "c2"}
	pl, err := f.planWith(t, plan.Input{Mode: plan.Deploy, Desired: want})
	if err == nil || !strings.Contains(err.Error(), "resources.c is protected (protect: true") || !strings.Contains(err.Error(), "would rebuild it") {
		t.Fatalf("plan error %v, want c protected from a rebuild", err)
	}
	before := generations(f.ad)
	res, _ := f.apply(pl, false)
	if o := res.Outcomes["resources.d"]; o == nil || !o.Skipped {
		t.Fatalf("d outcome %+v, want held back behind protected c", o)
	}
	if generations(f.ad)["resources.c"] != before["resources.c"] {
		t.Fatal("protected c was rebuilt")
	}

	// Destroy reads protection from the descriptor too.
	want = diamond("v1")
	want["resources.c"].Protect = true
	pl, err = f.planWith(t, plan.Input{Mode: plan.Destroy, Desired: want})
	if err == nil || !strings.Contains(err.Error(), "would delete it") {
		t.Fatalf("destroy plan error %v, want c protected from deletion", err)
	}
	f.apply(pl, false)
	objs := f.ad.Objects()
	if _, ok := objs["resources.c"]; !ok {
		t.Fatal("protected c was deleted")
	}
	if _, ok := objs["resources.d"]; ok {
		t.Fatal("d (not protected, depends on c) was not deleted")
	}
}

// renaming answers a resource's STALE actions under other names once
// switched on: the same op, other actions than the plan showed.
type renaming struct {
	*memadapter.Adapter
	mu      sync.Mutex
	renamed map[string]string // resource -> action name
}

func (r *renaming) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	ans, err := r.Adapter.State(ctx, c, desired)
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := r.renamed[c.Name]; ok && err == nil && ans.Status == protocol.Stale {
		ans.Actions = []protocol.ActionSpec{{Name: name}}
	}
	return ans, err
}

// An approved rebuild may not run as an update at apply (the adapter now
// content to change in place): the plan is the whole contract. The
// resource is left untouched and what depends on it held back, with its
// state unchanged.
func TestApprovedRebuildDoesNotRunAsAnUpdate(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	f.ad.Rebuild = []string{"value"}
	pl := f.plan(t, plan.Deploy, diamond("v2"))
	if a := pl.Step("resources.a"); a.Op != plan.Rebuild {
		t.Fatalf("a planned %s, want rebuild", a.Op)
	}
	f.ad.Rebuild = nil // at apply the adapter would update in place
	before, prior := generations(f.ad), f.store.snapshot()
	res, err := f.apply(pl, true)
	if !apply.IsFailed(err) {
		t.Fatalf("apply error %v, want a failure", err)
	}
	if inc := inconsistent(t, res, "resources.a"); inc.Approved != plan.Rebuild || inc.Actual != plan.Update {
		t.Fatalf("a: %+v, want approved rebuild, actual update", inc)
	}
	if generations(f.ad)["resources.a"] != before["resources.a"] {
		t.Fatal("a was touched")
	}
	for _, n := range []string{"resources.b", "resources.c", "resources.d"} {
		if o := res.Outcomes[n]; o == nil || !o.Skipped {
			t.Fatalf("%s outcome %+v, want held back (it depends on a)", n, o)
		}
		if !reflect.DeepEqual(f.store.snapshot().Resources[n], prior.Resources[n]) {
			t.Fatalf("%s: state changed although it was held back", n)
		}
	}
}

// The same op with other actions than the plan showed is refused too.
func TestSameOpWithOtherActionsIsRefused(t *testing.T) {
	f := newFixture()
	f.deploy(t, diamond("v1"))
	pl := f.plan(t, plan.Deploy, diamond("v2"))
	if a := pl.Step("resources.a"); a.Op != plan.Update || len(a.Actions) != 1 || a.Actions[0].Name != "update" {
		t.Fatalf("a planned %s %v, want update with the action update", a.Op, a.Actions)
	}
	ad := &renaming{Adapter: f.ad, renamed: map[string]string{"resources.a": "wipe-and-update"}}
	before := generations(f.ad)
	ex := &apply.Executor{Adapters: ad, Store: f.store, Walk: engine.GraphWalk(4), Recheck: true}
	res, err := ex.Apply(context.Background(), pl)
	if !apply.IsFailed(err) {
		t.Fatalf("apply error %v, want a failure", err)
	}
	inconsistent(t, res, "resources.a")
	if msg := res.Outcomes["resources.a"].Err.Error(); !strings.Contains(msg, "approved the actions update, but the adapter now answers wipe-and-update") {
		t.Fatalf("a: %q, want the actions named", msg)
	}
	if generations(f.ad)["resources.a"] != before["resources.a"] {
		t.Fatal("a was touched")
	}
	if o := res.Outcomes["resources.d"]; o == nil || !o.Skipped {
		t.Fatalf("d outcome %+v, want held back", o)
	}
}

// liar answers STALE again after a resource's actions ran.
type liar struct {
	*memadapter.Adapter
	name string
}

func (l *liar) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	if c.Name == l.name && desired == protocol.Present && c.Persisted != nil && c.Persisted.Pending != nil {
		return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "update"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeUpdate}}, nil
	}
	return l.Adapter.State(ctx, c, desired)
}

// A step that fails after its operation was recorded (its action failed,
// or its adapter answers STALE again after it) records the failure and
// why, so that ps and state show say Failed, not the status the resource
// had before.
func TestFailedStepIsRecordedAsFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		ad   func(f *fixture) plan.Adapters
		why  string
	}{
		{"action fails", func(f *fixture) plan.Adapters {
			f.ad.FailActions = map[string]bool{"resources.c": true}
			return f.ad
		}, "update failed on purpose"},
		{"STALE again after the action", func(f *fixture) plan.Adapters { return &liar{Adapter: f.ad, name: "resources.c"} }, "answered STALE again after its actions ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture()
			f.deploy(t, diamond("v1"))
			want := diamond("v1")
			want["resources.c"].Config = map[string]any{"value": "c2"}
			pl := f.plan(t, plan.Deploy, want)
			ex := &apply.Executor{Adapters: tc.ad(f), Store: f.store, Walk: engine.GraphWalk(4)}
			if _, err := ex.Apply(context.Background(), pl); !apply.IsFailed(err) {
				t.Fatalf("apply error %v, want a failure", err)
			}
			c := f.store.snapshot().Resources["resources.c"]
			if c.Pending == nil || !strings.Contains(c.Pending.Failed, tc.why) || c.Pending.FailedAt == nil {
				t.Fatalf("c's record %+v, want its pending update marked failed with %q", c.Pending, tc.why)
			}
		})
	}
}
