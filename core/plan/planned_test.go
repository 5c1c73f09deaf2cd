package plan_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/internal/memadapter"
	"github.com/gcompose/gcompose/protocol"
)

// planning is the in-memory adapter that says, in its STALE answers to a
// create, update or rebuild, which outputs the object will have (protocol
// StateExt.Planned): its config and its id are known before, its
// generation only after. lie overrides planned values, as a broken
// adapter would.
type planning struct {
	*memadapter.Adapter
	lie map[string]any
}

func (p *planning) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	ans, err := p.Adapter.State(ctx, c, desired)
	if err != nil || ans.Status != protocol.Stale || ans.Gcompose == nil || ans.Gcompose.Change == protocol.ChangeDelete {
		return ans, err
	}
	planned := map[string]any{"/id": c.Name}
	for k, v := range c.Config {
		planned["/"+jsonpointer.Escape(k)] = v
	}
	for k, v := range p.lie {
		planned[k] = v
	}
	ans.Gcompose.Planned, ans.Gcompose.Unknown = planned, []string{"/generation"}
	return ans, nil
}

// deployedIn is the store and state after a deploy of want with ad.
func deployedIn(t *testing.T, ad plan.Adapters, want map[string]*plan.Resource) (*state.MemoryStore, *state.Document) {
	t.Helper()
	ctx := context.Background()
	st := state.NewMemoryStore()
	e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
	if _, err := e.Run(ctx, engine.Request{App: "app", Mode: plan.Deploy, Desired: want}); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	doc, err := st.Load(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	return st, doc
}

func planWith(t *testing.T, ad plan.Adapters, want map[string]*plan.Resource, doc *state.Document) *plan.Plan {
	t.Helper()
	p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
	pl, err := p.Plan(context.Background(), plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return pl
}

func ops(pl *plan.Plan) map[string]plan.Op {
	out := map[string]plan.Op{}
	for _, s := range pl.Steps {
		out[s.Resource] = s.Op
	}
	return out
}

// The tutorial's "the db's provider dies", in memory: db is rebuilt, but
// what web reads of it is planned, so web (and the proxy that reads web) is
// unchanged, not a knock-on, and deploy changes what the plan said: db.
func TestPlannedOutputsKeepTheirReadersUnchanged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adapter func(*memadapter.Adapter) plan.Adapters
		want    map[string]plan.Op
		changed []string
		golden  string
	}{
		{"planned", func(m *memadapter.Adapter) plan.Adapters { return &planning{Adapter: m} },
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.NoOp, "services.proxy": plan.NoOp},
			[]string{"rebuild services.db"}, "plan-planned.golden"},
		// Without planned values nothing is known of the rebuilt db: web
		// is a knock-on (that apply finds unchanged), as before.
		{"not planned", func(m *memadapter.Adapter) plan.Adapters { return m },
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.Rebuild, "services.proxy": plan.Update},
			[]string{"rebuild services.db"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memadapter.New()
			mem.Rebuild = []string{"image", "db"}
			ad := tc.adapter(mem)
			st, doc := deployedIn(t, ad, chain("v1", "nginx"))
			// db's image changes, its value (what web reads) does not.
			want := chain("v1", "nginx")
			want["services.db"].Config["image"] = "postgres:17"
			pl := planWith(t, ad, want, doc)
			if got := ops(pl); !mapsEqual(got, tc.want) {
				t.Fatalf("plan: %v, want %v", got, tc.want)
			}
			if tc.golden != "" {
				if pl.Step("services.web").KnownAfterApply {
					t.Error("web reads only a planned output: its inputs are known now")
				}
				var b bytes.Buffer
				pl.Render(&b, plan.RenderOptions{})
				golden.Check(t, filepath.Join("testdata", tc.golden), b.Bytes())
			}

			e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
			out, err := e.Run(context.Background(), engine.Request{App: "app", Mode: plan.Deploy, Desired: want})
			if err != nil {
				t.Fatalf("deploy: %v", err)
			}
			var changed []string
			for _, o := range out.Result.Outcomes {
				if o.Changed {
					changed = append(changed, o.Resource)
				}
			}
			if len(changed) != 1 || changed[0] != "services.db" {
				t.Fatalf("deploy changed %v, want services.db only", changed)
			}
			if got := mem.Log()[len(mem.Log())-1:]; !slices.Equal(got, tc.changed) {
				t.Fatalf("last actions %v, want %v", got, tc.changed)
			}
		})
	}
}

// A planned value that changes shows its readers as what they really
// become (~ or -/+ from their adapter's own answer), and their readers in
// turn as unchanged when what they read is planned and the same.
func TestPlannedValueThatChangesIsShownAsItIs(t *testing.T) {
	mem := memadapter.New()
	mem.Rebuild = []string{"value", "db"}
	ad := &planning{Adapter: mem}
	_, doc := deployedIn(t, mem, chain("v1", "nginx"))
	pl := planWith(t, ad, chain("v2", "nginx"), doc)
	want := map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.Rebuild, "services.proxy": plan.NoOp}
	if got := ops(pl); !mapsEqual(got, want) {
		t.Fatalf("plan: %v, want %v", got, want)
	}
	web := pl.Step("services.web")
	if web.KnownAfterApply || web.After["db"] != "v2" || web.Answer == nil {
		t.Fatalf("web: known after apply %v, after %v: want it planned with db's planned value v2, from its adapter's answer", web.KnownAfterApply, web.After)
	}
}

// What is not planned (db's generation) is known after apply: its readers
// are knock-ons. What a knock-on plans is not trusted either: its adapter
// was asked with ${...} text for the unknown values, which it may echo.
func TestUnplannedOutputsAndKnockOnsStayUnknown(t *testing.T) {
	mem := memadapter.New()
	mem.Rebuild = []string{"value"}
	ad := &planning{Adapter: mem}
	want := chain("v1", "nginx")
	want["services.web"].Config["db"] = "${services.db.generation}"
	want["services.proxy"].Config["target"] = "${services.web.db}"
	_, doc := deployedIn(t, mem, want)
	want = chain("v2", "nginx")
	want["services.web"].Config["db"] = "${services.db.generation}"
	want["services.proxy"].Config["target"] = "${services.web.db}"
	pl := planWith(t, ad, want, doc)
	for _, name := range []string{"services.web", "services.proxy"} {
		if s := pl.Step(name); !s.KnownAfterApply || s.Op == plan.NoOp {
			t.Errorf("%s: %s (known after apply %v), want a knock-on", name, s.Op, s.KnownAfterApply)
		}
	}
	if got := pl.Step("services.proxy").After["target"]; got != "${services.web.db}" {
		t.Errorf("proxy's target planned as %v: a knock-on's planned values were trusted", got)
	}
}

// apply holds an adapter to what it planned: a resource whose actions
// leave another value fails, recorded as it is, and what was planned with
// the promised value is held back, untouched.
func TestApplyFailsAResourceThatBreaksItsPlannedOutputs(t *testing.T) {
	mem := memadapter.New()
	mem.Rebuild = []string{"image", "db"}
	ad := &planning{Adapter: mem}
	st, _ := deployedIn(t, ad, chain("v1", "nginx"))
	ad.lie = map[string]any{"/value": "v9"}
	want := chain("v1", "nginx")
	want["services.db"].Config["image"] = "postgres:17"
	e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
	out, err := e.Run(context.Background(), engine.Request{App: "app", Mode: plan.Deploy, Desired: want})
	var broken *plan.UnplannedOutputError
	if !errors.As(err, &broken) || broken.Resource != "services.db" || broken.Pointer != "/value" {
		t.Fatalf("deploy: %v, want services.db failed for its planned /value", err)
	}
	t.Logf("deploy: %v", err)
	if s := out.Plan.Step("services.web"); s.Op != plan.Rebuild || s.After["db"] != "v9" {
		t.Fatalf("web planned %s with %v, want a rebuild with the promised v9", s.Op, s.After["db"])
	}
	if w := out.Result.Outcomes["services.web"]; w == nil || !w.Skipped {
		t.Fatalf("web: %+v, want it held back", w)
	}
	if log := mem.Log(); slices.Contains(log, "rebuild services.web") || slices.Contains(log, "delete services.web") {
		t.Fatalf("web was touched: %v", log)
	}
	d, _ := st.Load(context.Background(), "app")
	if r := d.Resources["services.db"]; r == nil || r.Config["image"] != "postgres:17" || r.Status != state.StatusActive {
		t.Fatalf("the rebuilt db is not recorded as it is: %+v", r)
	}
}

func mapsEqual(a, b map[string]plan.Op) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A rebuild gcompose forces (--replace, or a new adapter image) asks the
// adapter what the create after the removal will leave (protocol
// RequestExt.Replace), so that what reads the planned outputs is planned
// with them, unchanged, instead of as a knock-on; deploy then changes only
// the rebuilt resource. An adapter that plans nothing leaves the readers
// known after apply, as before.
func TestForcedRebuildsPlanTheirOutputs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		adapter func(*memadapter.Adapter) plan.Adapters
		// replace is the --replace list; retype gives db a new adapter image.
		replace []string
		retype  bool
		want    map[string]plan.Op
		golden  string
	}{
		{"replace planned", func(m *memadapter.Adapter) plan.Adapters { return &planning{Adapter: m} },
			[]string{"services.db"}, false,
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.NoOp, "services.proxy": plan.NoOp}, "plan-replace-planned.golden"},
		{"new adapter image planned", func(m *memadapter.Adapter) plan.Adapters { return &planning{Adapter: m} },
			nil, true,
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.NoOp, "services.proxy": plan.NoOp}, "plan-retype-planned.golden"},
		{"replace not planned", func(m *memadapter.Adapter) plan.Adapters { return m },
			[]string{"services.db"}, false,
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.Rebuild, "services.proxy": plan.Update}, ""},
		{"new adapter image not planned", func(m *memadapter.Adapter) plan.Adapters { return m },
			nil, true,
			map[string]plan.Op{"services.db": plan.Rebuild, "services.web": plan.Rebuild, "services.proxy": plan.Update}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memadapter.New()
			mem.Rebuild = []string{"image", "db"}
			ad := tc.adapter(mem)
			st, doc := deployedIn(t, ad, chain("v1", "nginx"))
			want := chain("v1", "nginx")
			if tc.retype {
				want["services.db"].Type = "mem2"
			}
			p := &plan.Planner{Adapters: ad, Walk: engine.GraphWalk(2)}
			in := plan.Input{App: "app", Mode: plan.Deploy, Desired: want, State: doc, Replace: tc.replace}
			pl, err := p.Plan(context.Background(), in)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			if got := ops(pl); !mapsEqual(got, tc.want) {
				t.Fatalf("plan: %v, want %v", got, tc.want)
			}
			if tc.golden != "" {
				if web := pl.Step("services.web"); web.KnownAfterApply || web.After["db"] != "v1" {
					t.Errorf("web: known after apply %v, db %v: want it planned with db's planned value v1", web.KnownAfterApply, web.After["db"])
				}
				var b bytes.Buffer
				pl.Render(&b, plan.RenderOptions{})
				golden.Check(t, filepath.Join("testdata", tc.golden), b.Bytes())
			}

			e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
			out, err := e.Run(context.Background(), engine.Request{App: "app", Mode: plan.Deploy, Desired: want, Replace: tc.replace})
			if err != nil {
				t.Fatalf("deploy: %v", err)
			}
			var changed []string
			for _, o := range out.Result.Outcomes {
				if o.Changed {
					changed = append(changed, o.Resource)
				}
			}
			if len(changed) != 1 || changed[0] != "services.db" {
				t.Fatalf("deploy changed %v, want services.db only", changed)
			}
			if got := mem.Log()[len(mem.Log())-2:]; !slices.Equal(got, []string{"delete services.db", "create services.db"}) {
				t.Fatalf("last actions %v, want db deleted, then created", got)
			}
		})
	}
}

// apply holds a forced rebuild to what it planned: a replaced resource
// whose create leaves another value fails, and what was planned with the
// promised value is held back.
func TestApplyFailsAReplacedResourceThatBreaksItsPlannedOutputs(t *testing.T) {
	mem := memadapter.New()
	mem.Rebuild = []string{"image", "db"}
	ad := &planning{Adapter: mem}
	st, _ := deployedIn(t, ad, chain("v1", "nginx"))
	ad.lie = map[string]any{"/value": "v9"}
	e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
	out, err := e.Run(context.Background(), engine.Request{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), Replace: []string{"services.db"}})
	var broken *plan.UnplannedOutputError
	if !errors.As(err, &broken) || broken.Resource != "services.db" || broken.Pointer != "/value" {
		t.Fatalf("deploy: %v, want services.db failed for its planned /value", err)
	}
	if s := out.Plan.Step("services.db"); !s.Replace || s.Planned["/value"] != "v9" {
		t.Fatalf("db: replace %v, planned %v: want the replaced db's planned (lying) /value", s.Replace, s.Planned)
	}
	if w := out.Result.Outcomes["services.web"]; w == nil || !w.Skipped {
		t.Fatalf("web: %+v, want it held back", w)
	}
	if log := mem.Log(); slices.Contains(log, "rebuild services.web") || slices.Contains(log, "delete services.web") {
		t.Fatalf("web was touched: %v", log)
	}
}

// adopting answers, once db is gone, VALID with what it finds under db's
// name: another value than its create planned, as an adapter that adopts
// a stranger's object would.
type adopting struct{ *planning }

func (a *adopting) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	if _, exists := a.Objects()[c.Name]; !exists && !c.Replace && c.Name == "services.db" && desired == protocol.Present {
		return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"id": c.Name, "image": "postgres", "value": "v9"}}, nil
	}
	return a.planning.State(ctx, c, desired)
}

// The check holds also when the state call after the removal finds the
// resource as wanted with nothing to run: it must still be as planned.
func TestApplyChecksPlannedOutputsOfAResourceFoundValid(t *testing.T) {
	mem := memadapter.New()
	st, _ := deployedIn(t, &planning{Adapter: mem}, chain("v1", "nginx"))
	ad := &adopting{&planning{Adapter: mem}}
	e := &engine.Engine{Adapters: ad, Store: st, Parallelism: 2}
	_, err := e.Run(context.Background(), engine.Request{App: "app", Mode: plan.Deploy, Desired: chain("v1", "nginx"), Replace: []string{"services.db"}})
	var broken *plan.UnplannedOutputError
	if !errors.As(err, &broken) || broken.Resource != "services.db" || broken.Pointer != "/value" || broken.Actual != "v9" {
		t.Fatalf("deploy: %v, want services.db failed: planned /value v1, found v9", err)
	}
}
