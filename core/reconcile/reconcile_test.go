package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/schemas"
)

// events collects what a reconciler reports.
type events struct {
	mu  sync.Mutex
	all []Event
}

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) phases() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, ev := range e.all {
		out = append(out, ev.Phase)
	}
	return out
}

func (e *events) last(phase string) *Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if e.all[i].Phase == phase {
			ev := e.all[i]
			return &ev
		}
	}
	return nil
}

// metric reads one series from the reconciler's registry: name and the
// labels other than app; a histogram gives its sample count.
func metric(t *testing.T, r *Reconciler, name string, labels ...string) float64 {
	t.Helper()
	fams, err := r.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func counter(t *testing.T, r *Reconciler, name, label string) float64 {
	t.Helper()
	switch name {
	case "repairs":
		return metric(t, r, "gcompose_reconcile_repairs_total", "result", label)
	case "cycles":
		return metric(t, r, "gcompose_reconcile_cycles_total", "outcome", label)
	case "resources":
		return metric(t, r, "gcompose_reconcile_resources", "status", label)
	case "failures":
		return metric(t, r, "gcompose_reconcile_failures_total", "stage", label)
	}
	panic(name)
}

func TestCycleRepairsWhatDiedAndItsKnockOns(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	ev := &events{}
	r := b.reconciler(Config{Events: ev.add})
	ctx := context.Background()

	if res := r.Cycle(ctx, ctx); res.Outcome != Healthy || res.Err != nil {
		t.Fatalf("first cycle on a healthy app: %+v", res)
	}
	if got := counter(t, r, "resources", "active"); got != 3 {
		t.Fatalf("resources{active} = %v, want 3", got)
	}
	other, rentals := b.w.live("resources.other"), b.w.rented()
	b.w.kill(t, "resources.db")

	res := r.Cycle(ctx, ctx)
	if res.Outcome != Repaired || res.Err != nil {
		t.Fatalf("cycle after db died: %+v", res)
	}
	if len(res.Drifted) != 1 || res.Drifted[0].Resource != "resources.db" {
		t.Fatalf("drifted: %+v", res.Drifted)
	}
	if !slices.Equal(res.Targets, []string{"resources.db", "resources.web"}) || !slices.Equal(res.KnockOns, []string{"resources.web"}) {
		t.Fatalf("targets %v, knock-ons %v", res.Targets, res.KnockOns)
	}
	// db is rented again at a new address; web reads it, so it is updated.
	if !slices.Equal(res.Changes, []string{"rebuild resources.db", "update resources.web"}) {
		t.Fatalf("changes: %v", res.Changes)
	}
	if b.w.rented() != rentals+1 {
		t.Fatalf("rentals %d → %d: want exactly one more", rentals, b.w.rented())
	}
	if b.w.live("resources.other") != other {
		t.Fatal("the repair touched resources.other, which did not drift")
	}
	if b.w.live("resources.db") == "" {
		t.Fatal("db is not running after the repair")
	}
	if got := counter(t, r, "repairs", "repaired"); got != 1 {
		t.Fatalf("repairs{repaired} = %v", got)
	}
	if n := metric(t, r, "gcompose_reconcile_time_to_repair_seconds"); n != 1 {
		t.Fatalf("time_to_repair has %v samples", n)
	}
	wantPhases := []string{PhaseDrift, PhaseRepair, PhaseRepaired}
	if !slices.Equal(ev.phases(), wantPhases) {
		t.Fatalf("events %v, want %v", ev.phases(), wantPhases)
	}
	if e := ev.last(PhaseRepaired); e.Duration <= 0 || !strings.Contains(e.Message, "rebuild resources.db") {
		t.Fatalf("repaired event: %+v", e)
	}
	if res := r.Cycle(ctx, ctx); res.Outcome != Healthy {
		t.Fatalf("cycle after the repair: %+v", res)
	}
	if b.w.rented() != rentals+1 {
		t.Fatal("a healthy cycle rented")
	}
}

func TestCycleRepairsNothingWhileTheDescriptorIsNotTheDeployedOne(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	ev := &events{}
	r := b.reconciler(Config{Events: ev.add})
	ctx := context.Background()
	changed := testIntent()
	changed.Desired["resources.web"].Config = map[string]any{"db": "${resources.db.state.ip}", "replicas": 2}
	b.setIntent(changed)
	b.w.kill(t, "resources.db")
	rentals := b.w.rented()

	for i := range 3 {
		res := r.Cycle(ctx, ctx)
		if res.Outcome != Mismatch || len(res.Mismatches) != 1 || !strings.Contains(res.Mismatches[0], "resources.web: its config differs from the one deployed (replicas)") {
			t.Fatalf("cycle %d with an undeployed change: %+v", i, res)
		}
	}
	if b.w.rented() != rentals {
		t.Fatal("a reconciler rented while the descriptor differed from the deployed one")
	}
	// One event for three cycles of the same mismatch.
	if n := strings.Count(strings.Join(ev.phases(), " "), PhaseIntent); n != 1 {
		t.Fatalf("%d intent events for one mismatch: %v", n, ev.phases())
	}
	if e := ev.last(PhaseIntent); !strings.Contains(e.Message, "drifted meanwhile: resources.db (stale") {
		t.Fatalf("intent event: %s", e.Message)
	}
	if got := metric(t, r, "gcompose_reconcile_intent_mismatch"); got != 1 {
		t.Fatalf("intent_mismatch = %v", got)
	}

	// Deployed by a person: the reconciler follows the new descriptor.
	b.setIntent(testIntent())
	res := r.Cycle(ctx, ctx)
	if res.Outcome != Repaired {
		t.Fatalf("after the descriptor was put back: %+v", res)
	}
	if got := metric(t, r, "gcompose_reconcile_intent_mismatch"); got != 0 {
		t.Fatalf("intent_mismatch = %v after", got)
	}
}

func TestCompare(t *testing.T) {
	deployed := func() *state.Document {
		b := newBed(t, state.NewMemoryStore())
		doc, err := b.store.Load(context.Background(), "shop")
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}()
	// dbRebuilt: db was rented again at another address after web was
	// applied (a repair that did not get to web).
	dbRebuilt := func(doc *state.Document) {
		db := doc.Resources["resources.db"]
		db.State = map[string]any{"ip": "10.9.9.9"}
		db.UpdatedAt = doc.Resources["resources.web"].UpdatedAt.Add(time.Second)
	}
	for _, tc := range []struct {
		name   string
		change func(in *Intent, doc *state.Document)
		want   []string
		behind []string
	}{
		{"the deployed descriptor", func(*Intent, *state.Document) {}, nil, nil},
		{"a new resource", func(in *Intent, _ *state.Document) {
			in.Desired["resources.new"] = &plan.Resource{Name: "resources.new", Type: fakeType}
		}, []string{"resources.new: in the descriptor, never deployed"}, nil},
		{"a removed resource", func(in *Intent, _ *state.Document) { delete(in.Desired, "resources.other") },
			[]string{"resources.other: deployed, no longer in the descriptor"}, nil},
		{"another image", func(in *Intent, _ *state.Document) { in.Desired["resources.db"].Type = "test/fake:2" },
			[]string{"resources.db: the descriptor says adapter test/fake:2, test/fake:1 was deployed"}, nil},
		{"a changed config", func(in *Intent, _ *state.Document) { in.Desired["resources.db"].Config = map[string]any{"size": 2} },
			[]string{"resources.db: its config differs from the one deployed (size)"}, nil},
		{"a reference to outputs not recorded is not compared", func(in *Intent, doc *state.Document) {
			doc.Resources["resources.db"].Status = state.StatusPending
		}, nil, nil},
		{"nothing deployed", func(in *Intent, doc *state.Document) { doc.Resources = nil },
			[]string{"nothing of shop is deployed (never, or destroyed since): the reconciler keeps a deployed application running and deploys nothing itself; it repairs again once a person deploys it (gcompose deploy)"}, nil},
		{"a knock-on left behind by a repair: its dependency moved after it", func(_ *Intent, doc *state.Document) { dbRebuilt(doc) }, nil, []string{"resources.web"}},
		{"a knock-on whose own operation did not finish", func(in *Intent, doc *state.Document) {
			doc.Resources["resources.db"].State = map[string]any{"ip": "10.9.9.9"}
			doc.Resources["resources.web"].Pending = &state.Operation{ID: "op", Kind: state.OpUpdate}
		}, nil, []string{"resources.web"}},
		{"a reference edited, its dependency unchanged since", func(in *Intent, doc *state.Document) {
			in.Desired["resources.web"].Config = map[string]any{"db": "http://${resources.db.state.ip}"}
		}, []string{"resources.web: its config differs from the one deployed (db)"}, nil},
		{"a knock-on left behind, and a key beside the reference edited", func(in *Intent, doc *state.Document) {
			dbRebuilt(doc)
			in.Desired["resources.web"].Config = map[string]any{"db": "${resources.db.state.ip}", "replicas": 2}
		}, []string{"resources.web: its config differs from the one deployed (db, replicas)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, doc := testIntent(), deployed.Clone()
			tc.change(in, doc)
			got, behind := Compare(in, doc)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("mismatches = %q, want %q", got, tc.want)
			}
			var names []string
			for _, d := range behind {
				if d.Drift != DriftInputs || !strings.Contains(d.Reason, "the outputs it reads changed since it was applied") {
					t.Fatalf("left behind: %+v", d)
				}
				names = append(names, d.Resource)
			}
			if !slices.Equal(names, tc.behind) {
				t.Fatalf("left behind = %v, want %v", names, tc.behind)
			}
		})
	}
}

func TestCheckRepairRefusesMoreThanARepair(t *testing.T) {
	doc := &state.Document{App: "shop", Resources: map[string]*state.Resource{
		"resources.db": {Name: "resources.db"}, "resources.web": {Name: "resources.web"}, "resources.other": {Name: "resources.other"},
	}}
	targets := []string{"resources.db", "resources.web"}
	for _, tc := range []struct {
		name  string
		steps []*plan.Step
		want  string
	}{
		{"a rebuild and a knock-on", []*plan.Step{{Resource: "resources.db", Op: plan.Rebuild}, {Resource: "resources.web", Op: plan.Update}, {Resource: "resources.other", Op: plan.NoOp}}, ""},
		{"a delete", []*plan.Step{{Resource: "resources.db", Op: plan.Delete, Reason: "gone from the descriptor"}},
			"repair refused: it would delete resources.db (gone from the descriptor): a reconciler never removes anything"},
		{"a forget", []*plan.Step{{Resource: "resources.web", Op: plan.Forget, Reason: "already gone"}},
			"repair refused: it would forget resources.web (already gone): a reconciler never removes anything"},
		{"a create of what was never deployed", []*plan.Step{{Resource: "resources.new", Op: plan.Create}},
			"repair refused: it would create resources.new, which was never deployed"},
		{"a change beyond the targets", []*plan.Step{{Resource: "resources.other", Op: plan.Update, Reason: "config changed"}},
			"repair refused: it would update resources.other, which did not drift (config changed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRepair(&plan.Plan{Steps: tc.steps}, doc, targets)
			if got := errString(err); got != tc.want {
				t.Fatalf("checkRepair = %q, want %q", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// spendOf is a Spender with a fixed answer.
type spendOf struct {
	sp  *Spend
	err error
}

func (s spendOf) Spent(context.Context, *state.Document, *plan.Plan) (*Spend, error) {
	return s.sp, s.err
}

func TestCycleRefusesAReplacementOverTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  Budget // the descriptor's
		flags   Budget
		spender Spender
		want    string // in the refusal; "" repairs
		// golemLike: web is a knock-on that may be rebuilt (and is not:
		// db keeps its planned address).
		golemLike bool
		// spent is what each instance reports spent ("": nothing).
		spent string
	}{
		// Running: web and other at 0.01/h; the replacement's estimate 0.05/h.
		{"per hour below", Budget{PerHour: 0.06}, Budget{}, nil,
			"the application would cost 0.07 EUR per hour after the repair (resources.db 0.05/h (rebuild, market estimate), resources.other 0.01/h, resources.web 0.01/h (knock-on, may update: at its current price)), above budget.per_hour 0.06: nothing rented", false, ""},
		{"per hour enough", Budget{PerHour: 0.07}, Budget{}, nil, "", false, ""},
		{"a flag wins over the descriptor", Budget{PerHour: 1}, Budget{PerHour: 0.06}, nil, "above budget.per_hour 0.06", false, ""},
		{"total below", Budget{Total: 1}, Budget{}, spendOf{sp: &Spend{Total: 0.9}},
			"spent 0.9 EUR (0.9 accepted, 0 due) + the new rentals' whole agreements 0.15 (resources.db 0.15 over 3h (rebuild, market estimate)) = 1.05, above budget.total 1: nothing rented", false, ""},
		{"total enough", Budget{Total: 1.1}, Budget{}, spendOf{sp: &Spend{Total: 0.9}}, "", false, ""},
		{"what is due counts as spent", Budget{Total: 1.1}, Budget{}, spendOf{sp: &Spend{Total: 0.9, Due: 0.1}},
			"spent 1 EUR (0.9 accepted, 0.1 due) + the new rentals' whole agreements 0.15", false, ""},
		// Whether web is rebuilt is known only at apply: the total counts
		// it at its current agreement, although here it stays.
		{"a knock-on that may be rebuilt counts against the total", Budget{Total: 1}, Budget{}, spendOf{sp: &Spend{Total: 0.83}},
			"spent 0.83 EUR (0.83 accepted, 0 due) + the new rentals' whole agreements 0.18 (resources.db 0.15 over 3h (rebuild, market estimate), resources.web 0.03 over 3h (knock-on, may rebuild: at its current price)) = 1.01, above budget.total 1: nothing rented", true, ""},
		{"a knock-on that may be rebuilt, within the total", Budget{Total: 1.02}, Budget{}, spendOf{sp: &Spend{Total: 0.83}}, "", true, ""},
		{"total unreadable", Budget{Total: 100}, Budget{}, spendOf{err: errors.New("yagna down")},
			"budget.total is 100 EUR but what the application has spent cannot be read (yagna down): nothing rented", false, ""},
		// No Spender: what the adapters report (each live instance 0.45,
		// db's as recorded at deploy), summed by core.
		{"total from what the adapters report", Budget{Total: 1.4}, Budget{}, nil,
			"spent 1.35 EUR (1.35 accepted, 0 due) + the new rentals' whole agreements 0.15", false, "0.45"},
		{"spent in another currency", Budget{Total: 100}, Budget{}, spendOf{sp: &Spend{Currency: "USD", Total: 1}},
			"what the application has spent is in USD, its rentals cost EUR, and a budget counts one currency: nothing rented", false, ""},
		{"total from what the adapters report, enough", Budget{Total: 1.5}, Budget{}, nil, "", false, "0.45"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.golemLike = tc.golemLike
			w.spent = tc.spent
			b := newBedOf(t, state.NewMemoryStore(), w)
			in := testIntent()
			in.Budget = tc.budget
			b.setIntent(in)
			ev := &events{}
			r := b.reconciler(Config{Events: ev.add, Budget: tc.flags, Spender: tc.spender})
			ctx := context.Background()
			b.w.mu.Lock()
			b.w.price = 0.05
			b.w.mu.Unlock()
			b.w.kill(t, "resources.db")
			rentals := b.w.rented()
			res := r.Cycle(ctx, ctx)
			if tc.want == "" {
				if res.Outcome != Repaired || b.w.rented() != rentals+1 {
					t.Fatalf("within the budget: %+v, rentals %d → %d", res, rentals, b.w.rented())
				}
				if tc.golemLike && !slices.Equal(res.Changes, []string{"rebuild resources.db"}) {
					t.Fatalf("changes %v: web, planned as a possible rebuild, should have stayed", res.Changes)
				}
				return
			}
			if res.Outcome != Refused || res.Refused == nil || !res.Refused.Budget || !strings.Contains(res.Refused.Reason, tc.want) {
				t.Fatalf("over the budget: %+v\nwant a refusal with %q", res, tc.want)
			}
			if b.w.rented() != rentals {
				t.Fatal("rented over the budget")
			}
			if e := ev.last(PhaseRepairRefused); e == nil || e.Level != slog.LevelWarn || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("refusal event: %+v", e)
			}
			if got := counter(t, r, "repairs", "refused"); got != 1 {
				t.Fatalf("repairs{refused} = %v", got)
			}
			// The state still says db drifted, and nothing was written.
			doc, _ := b.store.Load(ctx, "shop")
			if doc.Resources["resources.db"].Pending != nil {
				t.Fatal("a refused repair left an operation on db")
			}
			// Tried again, refused again: no news, nothing rented.
			if res := r.Cycle(ctx, ctx); res.Outcome != Refused || b.w.rented() != rentals {
				t.Fatalf("second cycle over the budget: %+v", res)
			}
			if p := strings.Join(ev.phases(), " "); p != "drift repair repair-refused" {
				t.Fatalf("events after two refused cycles: %s", p)
			}
		})
	}
}

func TestCycleFailuresBackOff(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	ev := &events{}
	r := b.reconciler(Config{Events: ev.add})
	ctx := context.Background()
	b.w.mu.Lock()
	b.w.failCreates = 2
	b.w.mu.Unlock()
	b.w.kill(t, "resources.db")
	for i := 1; i <= 2; i++ {
		res := r.Cycle(ctx, ctx)
		if res.Outcome != Failed || !strings.Contains(errString(res.Err), "no provider would take resources.db") {
			t.Fatalf("cycle %d: %+v", i, res)
		}
		if s := r.Status(); s.ConsecutiveFailures != i {
			t.Fatalf("after %d failures the status says %d", i, s.ConsecutiveFailures)
		}
	}
	if e := ev.last(PhaseRepairFailed); e == nil || e.Level != slog.LevelError || !strings.Contains(e.Message, "repair 2 in a row to fail; next try in about") {
		t.Fatalf("failure event: %+v", e)
	}
	if got := counter(t, r, "repairs", "failed"); got != 2 {
		t.Fatalf("repairs{failed} = %v", got)
	}
	// The failed create left an operation pending; the next cycle resolves it.
	if res := r.Cycle(ctx, ctx); res.Outcome != Repaired {
		t.Fatalf("third cycle: %+v", res)
	}
	if s := r.Status(); s.ConsecutiveFailures != 0 {
		t.Fatalf("after a repair: %d failures", s.ConsecutiveFailures)
	}
}

// TestCycleRepairsAKnockOnThatFailed: db is rebuilt at a new address and
// web's update fails; the next cycle sees web left behind (its config
// differs from the applied one only where it reads db), not a descriptor
// change, and repairs it.
func TestCycleRepairsAKnockOnThatFailed(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	r := b.reconciler(Config{})
	ctx := context.Background()
	b.w.mu.Lock()
	b.w.failUpdates = 1
	b.w.mu.Unlock()
	b.w.kill(t, "resources.db")
	if res := r.Cycle(ctx, ctx); res.Outcome != Failed || !strings.Contains(errString(res.Err), "resources.web cannot be changed now") {
		t.Fatalf("cycle with web's update failing: %+v", res)
	}
	rentals := b.w.rented()
	res := r.Cycle(ctx, ctx)
	if res.Outcome != Repaired || len(res.Mismatches) > 0 || !slices.Equal(res.Changes, []string{"update resources.web"}) {
		t.Fatalf("the next cycle: %+v", res)
	}
	if len(res.Drifted) != 1 || res.Drifted[0].Resource != "resources.web" || res.Drifted[0].Drift != DriftInputs {
		t.Fatalf("drifted: %+v", res.Drifted)
	}
	if b.w.rented() != rentals {
		t.Fatal("repairing web rented")
	}
	if res := r.Cycle(ctx, ctx); res.Outcome != Healthy {
		t.Fatalf("after: %+v", res)
	}
}

func TestBackoffWait(t *testing.T) {
	b := Backoff{Interval: 10 * time.Second, Max: time.Minute, Jitter: 0.2}
	for _, tc := range []struct {
		failures int
		r        float64
		want     time.Duration
	}{
		{0, 0.5, 10 * time.Second},
		{0, 0, 8 * time.Second},
		{0, 1, 12 * time.Second},
		{1, 0.5, 20 * time.Second},
		{2, 0.5, 40 * time.Second},
		{3, 0.5, time.Minute},
		{30, 0.5, time.Minute},
		{30, 0, 48 * time.Second},
	} {
		if got := b.Wait(tc.failures, tc.r); got != tc.want {
			t.Errorf("Wait(%d, %v) = %s, want %s", tc.failures, tc.r, got, tc.want)
		}
	}
}

func TestCycleBusyWhileSomeoneDeploys(t *testing.T) {
	store := state.NewMemoryStore()
	b := newBed(t, store)
	b.lockTimeout = 0
	r := b.reconciler(Config{})
	ctx := context.Background()
	lock, err := store.Lock(ctx, "shop", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	b.w.kill(t, "resources.db")
	rentals := b.w.rented()
	if res := r.Cycle(ctx, ctx); res.Outcome != Busy || !errors.Is(res.Err, state.ErrLocked) {
		t.Fatalf("cycle while locked: %+v", res)
	}
	if b.w.rented() != rentals || counter(t, r, "cycles", string(Busy)) != 1 || counter(t, r, "failures", "refresh") != 0 {
		t.Fatal("a busy cycle rented or counted as a failure")
	}
	if err := store.Unlock(ctx, lock); err != nil {
		t.Fatal(err)
	}
	if res := r.Cycle(ctx, ctx); res.Outcome != Repaired {
		t.Fatalf("cycle once unlocked: %+v", res)
	}
}

// TestRunLeadsAloneAndStops: without an elector the reconciler leads at
// once and cycles until stopped.
func TestRunLeadsAloneAndStops(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	ev := &events{}
	r := b.reconciler(Config{Events: ev.add})
	ctx := context.Background()
	stop, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, stop) }()
	deadline := time.Now().Add(10 * time.Second)
	for counter(t, r, "cycles", string(Healthy)) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no three cycles in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := metric(t, r, "gcompose_reconcile_leader"); got != 1 {
		t.Fatalf("leader = %v while running alone", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := metric(t, r, "gcompose_reconcile_leader"); got != 0 {
		t.Fatalf("leader = %v after stop", got)
	}
	if p := ev.phases(); p[0] != PhaseLeader || p[len(p)-1] != PhaseLeader {
		t.Fatalf("events %v", p)
	}
}

// TestCycleStoppedIsNotAFailure: a cycle cut short by stop (the reconciler
// stops, or lost its leadership) before it changed anything counts no
// failure and backs nothing off.
func TestCycleStoppedIsNotAFailure(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	r := b.reconciler(Config{})
	ctx := context.Background()
	stop, cancel := context.WithCancel(ctx)
	cancel()
	b.w.kill(t, "resources.db")
	rentals := b.w.rented()
	res := r.Cycle(ctx, stop)
	if res.Outcome != Stopped || !errors.Is(res.Err, apply.ErrInterrupted) {
		t.Fatalf("stopped cycle: %+v", res)
	}
	if b.w.rented() != rentals || counter(t, r, "repairs", "failed") != 0 || counter(t, r, "failures", "refresh") != 0 || r.Status().ConsecutiveFailures != 0 {
		t.Fatal("a stopped cycle rented or counted as a failure")
	}
}

// TestCycleStoppedMidRepair: stopped while db's create runs (Ctrl-C, or
// the leadership lost), the reconciler lets it finish, starts nothing
// more, and reports a cut-short repair, not a failure; the next cycle
// (the next run, or leader) finishes the repair from the state.
func TestCycleStoppedMidRepair(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	ev := &events{}
	r := b.reconciler(Config{Events: ev.add})
	ctx := context.Background()
	stop, cancel := context.WithCancel(ctx)
	block, entered := make(chan struct{}), make(chan string, 1)
	b.w.mu.Lock()
	b.w.blockFirst, b.w.entered = block, entered
	b.w.mu.Unlock()
	b.w.kill(t, "resources.db")
	rentals := b.w.rented()
	done := make(chan Result, 1)
	go func() { done <- r.Cycle(ctx, stop) }()
	if got := <-entered; got != "resources.db" {
		t.Fatalf("first create: %s", got)
	}
	cancel()
	close(block)
	res := <-done
	if res.Outcome != Stopped || !errors.Is(res.Err, apply.ErrInterrupted) {
		t.Fatalf("cycle stopped mid-repair: %+v", res)
	}
	if b.w.rented() != rentals+1 || b.w.live("resources.db") == "" {
		t.Fatal("db's create, under way when stopped, did not finish")
	}
	if counter(t, r, "repairs", "failed") != 0 || counter(t, r, "cycles", string(Stopped)) != 1 || r.Status().ConsecutiveFailures != 0 {
		t.Fatal("a repair cut short by a stop counted as a failure")
	}
	e := ev.last(PhaseRepairStopped)
	if e == nil || e.Level != slog.LevelWarn || !strings.Contains(e.Message, "the next leader or run finishes it") || !strings.Contains(e.Message, "resources.web") {
		t.Fatalf("repair-stopped event: %+v", e)
	}
	if ev.last(PhaseRepairFailed) != nil {
		t.Fatal("a stop reported as a failed repair")
	}
	// web, a knock-on that did not start, is done by the next cycle, which
	// rents nothing more.
	if res := r.Cycle(ctx, ctx); res.Outcome != Repaired || !slices.Equal(res.Changes, []string{"update resources.web"}) {
		t.Fatalf("the next cycle: %+v", res)
	}
	if b.w.rented() != rentals+1 {
		t.Fatalf("rentals %d → %d: rented twice", rentals, b.w.rented())
	}
}

// TestPhasesAreInTheEventsSchema: the reconciler's phases are the ones
// schemas/events.schema.json lists as gcompose reconcile's.
func TestPhasesAreInTheEventsSchema(t *testing.T) {
	raw, err := schemas.FS.ReadFile("events.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var sch struct {
		Defs struct {
			ReconcilePhase struct {
				Enum []string `json:"enum"`
			} `json:"reconcilePhase"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &sch); err != nil {
		t.Fatal(err)
	}
	ours := []string{PhaseLeader, PhaseDrift, PhaseRepair, PhaseRepaired, PhaseRepairFailed, PhaseRepairRefused, PhaseRepairStopped, PhaseIntent, PhaseCycleFailed}
	if got, want := slices.Sorted(slices.Values(sch.Defs.ReconcilePhase.Enum)), slices.Sorted(slices.Values(ours)); !slices.Equal(got, want) {
		t.Fatalf("events.schema.json $defs/reconcilePhase = %q, the reconciler's phases %q", got, want)
	}
}
