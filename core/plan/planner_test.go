package plan_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// web reads db's output; proxy reads web's.
func chain(dbValue, webImage string) map[string]*plan.Resource {
	return map[string]*plan.Resource{
		"services.db":    {Name: "services.db", Type: "mem", Config: map[string]any{"image": "postgres", "value": dbValue}},
		"services.web":   {Name: "services.web", Type: "mem", Config: map[string]any{"image": webImage, "db": "${services.db.value}"}, DependsOn: []string{"services.db"}},
		"services.proxy": {Name: "services.proxy", Type: "mem", Config: map[string]any{"target": "${services.web.image}"}, DependsOn: []string{"services.web"}},
	}
}

// The plan tells the truth: ~ only where the adapter updates in place, -/+
// where it recreates, with its reason; knock-ons show what they may become.
func TestPlanShowsUpdateVersusRebuild(t *testing.T) {
	for _, tc := range []struct {
		golden  string
		rebuild []string // config keys whose change makes the adapter recreate
		want    map[string]plan.Op
	}{
		{"plan-inplace.golden", nil,
			map[string]plan.Op{"services.db": plan.Update, "services.web": plan.Update, "services.proxy": plan.Update}},
		{"plan-recreate.golden", []string{"value", "db", "target"},
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.Rebuild, "services.proxy": plan.Rebuild}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			ad := memadapter.New()
			ad.Rebuild = tc.rebuild
			_, doc := deployedIn(t, ad, chain("v1", "nginx"))
			p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
			pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v2", "nginx"), State: doc})
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			for name, op := range tc.want {
				if got := pl.Step(name).Op; got != op {
					t.Errorf("%s: %s, want %s", name, got, op)
				}
			}
			if !pl.Step("services.web").KnownAfterApply {
				t.Error("web reads db's output, which changes: its inputs are known only after apply")
			}
			var b bytes.Buffer
			pl.Render(&b, plan.RenderOptions{})
			golden.Check(t, filepath.Join("testdata", tc.golden), b.Bytes())
		})
	}
}

// A knock-on of a resource not deployed yet is a create; one whose adapter
// cannot judge a config with unknown values is shown as a possible rebuild,
// the most apply may then do.
func TestKnockOnAdapterFailureShowsPossibleRebuild(t *testing.T) {
	ad := memadapter.New()
	_, doc := deployedIn(t, ad, chain("v1", "nginx"))
	ad.FailState = map[string]bool{"services.web": true}
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v2", "nginx"), State: doc})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if s := pl.Step("services.web"); s.Op != plan.Rebuild || !s.KnownAfterApply {
		t.Fatalf("web: %s (known after apply %v), want a possible rebuild", s.Op, s.KnownAfterApply)
	}
}

// The plan is the whole contract: apply may do the approved op or nothing,
// never a "smaller" op with other actions; only a step whose op was a
// guess (Possible: the adapter could not judge a knock-on) allows less.
func TestAllows(t *testing.T) {
	ops := []plan.Op{plan.NoOp, plan.Create, plan.Update, plan.Rebuild, plan.Delete}
	allowed := map[plan.Op][]plan.Op{
		plan.NoOp:    {plan.NoOp},
		plan.Update:  {plan.NoOp, plan.Update},
		plan.Create:  {plan.NoOp, plan.Create},
		plan.Rebuild: {plan.NoOp, plan.Rebuild},
		plan.Delete:  {plan.NoOp, plan.Delete},
		plan.Failed:  {},
	}
	possible := map[plan.Op][]plan.Op{
		plan.Rebuild: {plan.NoOp, plan.Create, plan.Update, plan.Rebuild},
	}
	for _, tc := range []struct {
		possible bool
		allowed  map[plan.Op][]plan.Op
	}{{false, allowed}, {true, possible}} {
		for approved, ok := range tc.allowed {
			for _, actual := range ops {
				want := slices.Contains(ok, actual)
				if got := (&plan.Step{Op: approved, Possible: tc.possible}).Allows(actual); got != want {
					t.Errorf("approved %s (possible %v), actual %s: allowed %v, want %v", approved, tc.possible, actual, got, want)
				}
			}
		}
	}
}

// A reference to an output that a deployed, unchanged resource does not
// report fails at plan time, naming what it does report, instead of a wait
// at apply for something that never comes.
func TestMissingOutputOfUnchangedResourceFailsThePlan(t *testing.T) {
	ad := memadapter.New()
	want := chain("v1", "nginx")
	_, doc := deployedIn(t, ad, want)
	want["services.proxy"].Config = map[string]any{"target": "${services.web.nosuchfield}"}
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc})
	if err == nil || !strings.Contains(err.Error(), "/target: ${services.web.nosuchfield}: services.web reports no such output (it reports: db, generation, id, image)") {
		t.Fatalf("plan error %v, want the missing output named with what web reports", err)
	}
	if s := pl.Step("services.proxy"); s.Op != plan.Failed {
		t.Fatalf("proxy: %s, want failed", s.Op)
	}
	// While web is about to change, its outputs are not known: no error.
	want = chain("v1", "httpd")
	want["services.proxy"].Config = map[string]any{"target": "${services.web.nosuchfield}"}
	if _, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc}); err != nil {
		t.Fatalf("plan with a changing dependency: %v", err)
	}
}

func TestOutputReferencingWhatAnUnchangedResourceLacksFailsThePlan(t *testing.T) {
	ad := memadapter.New()
	want := chain("v1", "nginx")
	_, doc := deployedIn(t, ad, want)
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	in := plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc,
		Outputs: map[string]any{"url": "http://${services.web.image}/", "bad": "${services.db.port}"}}
	_, err := p.Plan(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "outputs: /bad: ${services.db.port}: services.db reports no such output") {
		t.Fatalf("plan error %v, want the bad output named", err)
	}
	delete(in.Outputs, "bad")
	if _, err := p.Plan(context.Background(), in); err != nil {
		t.Fatalf("plan with good outputs: %v", err)
	}
}

// Before anything exists, a reference is checked against the outputs the
// adapter declares in its init answer.
func TestReferenceToAnUndeclaredOutputFailsBeforeTheResourceExists(t *testing.T) {
	ad := memadapter.New()
	ad.Outputs = []string{"db", "generation", "id", "image", "value"}
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	want := chain("v1", "nginx")
	want["services.proxy"].Config = map[string]any{"target": "${services.web.imagee}"}
	_, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: state.NewDocument("app")})
	if err == nil || !strings.Contains(err.Error(), "services.web will not report imagee: its adapter declares the outputs db, generation, id, image, value") {
		t.Fatalf("plan error %v, want the undeclared output named", err)
	}
	if _, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), State: state.NewDocument("app")}); err != nil {
		t.Fatalf("plan with declared outputs only: %v", err)
	}
	ad.Outputs = nil // an adapter that declares nothing is not checked
	if _, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: state.NewDocument("app")}); err != nil {
		t.Fatalf("plan against an adapter that declares no outputs: %v", err)
	}
}

// An adapter that says at plan time that a change cannot succeed
// (gcompose.refuse) fails the plan naming the resource and its message,
// also when the resource's inputs are known only after apply (its
// estimate answer refuses) and on a knock-on of a deployed resource.
func TestAdapterRefusalFailsThePlan(t *testing.T) {
	ad := memadapter.New()
	ad.Estimate = true // web's inputs are known after apply: asked for an estimate
	ad.Refuse = map[string]string{"services.web": "no offer within the caps"}
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), State: state.NewDocument("app")})
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || refused.Resource != "services.web" ||
		!strings.Contains(err.Error(), "services.web: refused by its adapter mem: no offer within the caps") {
		t.Fatalf("plan error %v, want services.web refused with the adapter's message", err)
	}
	if s := pl.Step("services.web"); s.Op != plan.Failed {
		t.Fatalf("web: %s, want failed", s.Op)
	}
	if s := pl.Step("services.db"); s.Op != plan.Create {
		t.Fatalf("db: %s, want create (not refused)", s.Op)
	}
	// Refused on its own answer (inputs known).
	ad.Refuse = map[string]string{"services.db": "no offer within the caps"}
	if _, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), State: state.NewDocument("app")}); err == nil ||
		!strings.Contains(err.Error(), "services.db: refused by its adapter mem: no offer within the caps") {
		t.Fatalf("plan error %v, want db refused", err)
	}
	// Deployed, then refused as a knock-on of a change of db.
	ad.Refuse = nil
	_, doc := deployedIn(t, ad, chain("v1", "nginx"))
	ad.Refuse = map[string]string{"services.web": "over budget"}
	if _, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: chain("v2", "nginx"), State: doc}); err == nil ||
		!strings.Contains(err.Error(), "services.web: refused by its adapter mem: over budget") {
		t.Fatalf("knock-on plan error %v, want web refused", err)
	}
}

// create_before_destroy: true is asked of an adapter that declares it, and
// its rebuild is shown +/-; without the declaration it stays -/+.
func TestCreateBeforeDestroyNeedsTheAdaptersDeclaration(t *testing.T) {
	for _, declared := range []bool{true, false} {
		ad := memadapter.New()
		ad.Rebuild = []string{"value"}
		ad.CreateBeforeDestroy = declared
		_, doc := deployedIn(t, ad, chain("v1", "nginx"))
		want := chain("v2", "nginx")
		want["services.db"].CreateBeforeDestroy = true
		p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
		pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc})
		if err != nil {
			t.Fatal(err)
		}
		s := pl.Step("services.db")
		wantSym := map[bool]string{true: "+/-", false: "-/+"}[declared]
		if s.Op != plan.Rebuild || s.CreateBeforeDestroy != declared || s.Symbol() != wantSym {
			t.Fatalf("declared %v: db %s, create before destroy %v, symbol %s; want rebuild %s", declared, s.Op, s.CreateBeforeDestroy, s.Symbol(), wantSym)
		}
	}
}

// Consistent holds an answer to the approved step: the same op, actions and
// forces, or nothing to do; an absent answer without a change kind is the
// delete it was planned as.
func TestConsistentWithTheApprovedStep(t *testing.T) {
	stale := func(change string, forces []string, actions ...string) *protocol.StateResult {
		ans := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Forces: forces}}
		for _, a := range actions {
			ans.Actions = append(ans.Actions, protocol.ActionSpec{Name: a})
		}
		return ans
	}
	old := &state.Resource{Name: "r"}
	approved := &plan.Step{Resource: "r", Op: plan.Rebuild, Forces: []string{"/path"}, Actions: []protocol.ActionSpec{{Name: "remove-old"}, {Name: "create"}}}
	approved.Answer = stale(protocol.ChangeRebuild, []string{"/path"}, "remove-old", "create")
	for _, tc := range []struct {
		name string
		step *plan.Step
		ans  *protocol.StateResult
		ok   bool
	}{
		{"same", approved, stale(protocol.ChangeRebuild, []string{"/path"}, "remove-old", "create"), true},
		{"nothing to do", approved, &protocol.StateResult{Status: protocol.Valid}, true},
		{"rebuild as update", approved, stale(protocol.ChangeUpdate, nil, "update"), false},
		{"other actions", approved, stale(protocol.ChangeRebuild, []string{"/path"}, "create", "remove-old"), false},
		{"other forces", approved, stale(protocol.ChangeRebuild, []string{"/mode"}, "remove-old", "create"), false},
		{"delete without a change kind", &plan.Step{Resource: "r", Op: plan.Delete, Actions: []protocol.ActionSpec{{Name: "delete"}}, Answer: stale("", nil, "delete")},
			&protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}}}, true},
	} {
		err := tc.step.Consistent(tc.ans, old)
		var inc *plan.Inconsistent
		if (err == nil) != tc.ok || (err != nil && !errors.As(err, &inc)) {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
