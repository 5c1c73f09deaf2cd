package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/memadapter"
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
