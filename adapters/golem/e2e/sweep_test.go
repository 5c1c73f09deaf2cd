package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// tagged makes what an adapter makes for (app, lineage, operation, resource)
// through the yagna API, as an interrupted run leaves it: a demand, and an
// approved agreement confirmed with the app's session. It returns the
// agreement's id.
func (e *env) tagged(ctx context.Context, lineage, op, resource string) (demandID, agreementID string) {
	e.t.Helper()
	t := e.t
	alloc, err := e.yc.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: payments.FundedDefault}})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := e.yc.DemandDecorations(ctx, alloc.AllocationID)
	if err != nil {
		t.Fatal(err)
	}
	// Only its decorations were needed.
	if err := e.yc.ReleaseAllocation(ctx, alloc.AllocationID); err != nil {
		t.Fatal(err)
	}
	props := map[string]any{
		"golem.srv.comp.expiration": time.Now().Add(time.Hour).UnixMilli(), "golem.node.debug.subnet": "public",
		"golem.srv.comp.task_package":       "hash:sha3:" + dbHash + ":http://registry.invalid/db",
		"golem.com.payment.chosen-platform": payments.FundedDefault,
		tag.App:                             e.app, tag.Lineage: lineage, tag.Operation: op, tag.Resource: resource,
	}
	for _, p := range dec.Properties {
		props[p.Key] = p.Value
	}
	cons := "(&" + strings.Join(append([]string{"(golem.runtime.name=vm)"}, dec.Constraints...), "") + ")"
	sub, err := e.yc.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := e.yc.CollectOffers(ctx, sub, 2*time.Second, 1)
	if err != nil || len(evs) == 0 || evs[0].Proposal == nil {
		t.Fatalf("CollectOffers: %+v, %v", evs, err)
	}
	props[service.PropAcceptTimeout] = evs[0].Proposal.Properties[service.PropAcceptTimeout]
	counter, err := e.yc.CounterProposal(ctx, sub, evs[0].Proposal.ProposalID, yagna.DemandOfferBase{Properties: props, Constraints: cons})
	if err != nil {
		t.Fatal(err)
	}
	for agreementID == "" {
		evs, err := e.yc.CollectOffers(ctx, sub, 2*time.Second, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.EventType == yagna.EventProposalRejected && ev.ProposalID == counter {
				t.Fatalf("counter-proposal rejected: %v", ev.Reason)
			}
			if ev.Proposal != nil && ev.Proposal.PrevProposalID == counter {
				if agreementID, err = e.yc.CreateAgreement(ctx, ev.Proposal.ProposalID, time.Now().Add(time.Minute)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := e.yc.ConfirmAgreement(ctx, agreementID, tag.SessionID(e.app)); err != nil {
		t.Fatal(err)
	}
	if err := e.yc.WaitForApproval(ctx, agreementID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return sub, agreementID
}

// call runs one adapter call in this process through the SDK, with the
// request as gcompose sends it, and returns its stdout.
func (e *env) call(ctx context.Context, a sdk.Adapter, args []string, req protocol.Request) string {
	e.t.Helper()
	req.Gcompose.Protocol = protocol.Version
	req.Gcompose.App = e.app
	req.Gcompose.Env = map[string]string{"YAGNA_API_URL": e.url, "GOLEM_REGISTRY_URL": e.url, "YAGNA_APPKEY": appKey}
	b, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := sdk.Run(ctx, a, args, bytes.NewReader(b), &out, &errOut); code != 0 {
		e.t.Fatalf("%s %v: exit %d\n%s", req.Type, args, code, errOut.String())
	}
	return out.String()
}

func stateOf(t *testing.T, out string) protocol.StateResult {
	t.Helper()
	var res protocol.StateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("state answer %q: %v", out, err)
	}
	return res
}

// TestInterruptedCreates: what a create made before it could record it is
// found by its operation's tag at the resource's next state call. The
// payments allocation is adopted (its keeper restarted for it); the
// service's demand and agreement are removed (a rental never recorded never
// got as far as its activity). Another lineage's objects are not touched.
func TestInterruptedCreates(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const lineage, op = "lineage-interrupted", "op-killed"
	pending := &protocol.Operation{ID: op, Kind: protocol.ChangeCreate, Action: "create", StartedAt: time.Now()}

	// payments: an allocation made by operation op, its id never recorded.
	timeout := tag.Timeout(time.Now().Add(time.Hour), lineage, op)
	alloc, err := e.yc.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "5", PaymentPlatform: &yagna.PaymentPlatform{Name: payments.FundedDefault}, Timeout: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	// The keeper runs from the payments image itself: the one start built.
	pay := protocol.Request{Name: "resources.golem-payments", Type: e.images["payments"], Config: map[string]any{"budget": "5"},
		Gcompose: &protocol.RequestExt{Call: protocol.CallState, Desired: protocol.Present, Lineage: lineage, Persisted: &protocol.Persisted{Pending: pending}}}
	st := stateOf(t, e.call(ctx, payments.Adapter(), []string{"state"}, pay))
	if st.Status != protocol.Stale || len(st.Actions) != 1 || st.Actions[0].Name != "keeper" || !strings.Contains(st.Gcompose.Reason, "adopting allocation "+alloc.AllocationID) {
		t.Fatalf("payments state with the create pending: %+v %+v", st, st.Gcompose)
	}
	// The keeper action records the adopted allocation and starts the keeper for it.
	act := pay
	act.StaleState = st.StaleState
	act.Gcompose = &protocol.RequestExt{Call: protocol.CallAction, Action: "keeper", Desired: protocol.Present, Lineage: lineage, Persisted: &protocol.Persisted{},
		Operation: &protocol.Operation{ID: "op-next", Kind: protocol.ChangeUpdate, Action: "keeper", StartedAt: time.Now()}}
	out := e.call(ctx, payments.Adapter(), []string{"action", "keeper"}, act)
	if !strings.Contains(out, protocol.IdentityPrefix+`{"allocation_id":"`+alloc.AllocationID+`"}`) {
		t.Fatalf("keeper action did not record the adopted allocation:\n%s", out)
	}
	pay.Gcompose.Persisted = &protocol.Persisted{Identity: map[string]any{"allocation_id": alloc.AllocationID}, Pending: pending}
	if st := stateOf(t, e.call(ctx, payments.Adapter(), []string{"state"}, pay)); st.Status != protocol.Valid {
		t.Fatalf("payments state after the keeper started: %+v", st)
	}

	// service: a demand and an agreement made by operation op, never recorded;
	// and another lineage's agreement, tagged with the same operation id.
	demand, agreement := e.tagged(ctx, lineage, op, "services.db")
	_, foreign := e.tagged(ctx, "another-lineage", op, "services.db")
	svc := protocol.Request{Name: "services.db", Type: adapterNames["service"], Config: map[string]any{"name": "db", "payload": map[string]any{"runtime": "vm", "params": map[string]any{"image_hash": dbHash}}},
		Gcompose: &protocol.RequestExt{Call: protocol.CallState, Desired: protocol.Absent, Lineage: lineage, Persisted: &protocol.Persisted{Pending: pending}}}
	st = stateOf(t, e.call(ctx, service.Adapter(), []string{"state"}, svc))
	if st.Status != protocol.Stale || len(st.Actions) != 1 || st.Actions[0].Name != "delete" || !strings.Contains(string(st.StaleState), agreement) ||
		!strings.Contains(string(st.StaleState), demand) || strings.Contains(string(st.StaleState), foreign) {
		t.Fatalf("service state with the create pending: %+v, staleState %s", st.Gcompose, st.StaleState)
	}
	svc.Gcompose.Desired = protocol.Present
	if st := stateOf(t, e.call(ctx, service.Adapter(), []string{"state"}, svc)); st.Status != protocol.Stale || st.Gcompose.Change != protocol.ChangeCreate ||
		!strings.Contains(st.Gcompose.Reason, "left by an interrupted operation") {
		t.Fatalf("service state (present) with the create pending: %+v", st.Gcompose)
	}
	del := svc
	del.StaleState = st.StaleState
	del.Gcompose = &protocol.RequestExt{Call: protocol.CallAction, Action: "delete", Desired: protocol.Absent, Lineage: lineage, Persisted: &protocol.Persisted{}}
	e.call(ctx, service.Adapter(), []string{"action", "delete"}, del)
	if a, err := e.yc.GetAgreement(ctx, agreement); err != nil || a.State != yagna.AgreementTerminated {
		t.Errorf("the interrupted create's agreement: %s, %v", a.State, err)
	}
	if a, err := e.yc.GetAgreement(ctx, foreign); err != nil || a.State != yagna.AgreementApproved {
		t.Errorf("another lineage's agreement: %s, %v; want it untouched", a.State, err)
	}
	if s := e.summary(ctx); s.Demands != 1 { // the foreign one
		t.Errorf("demands left: %+v", s)
	}
	svc.Gcompose.Desired = protocol.Absent
	if st := stateOf(t, e.call(ctx, service.Adapter(), []string{"state"}, svc)); st.Status != protocol.Valid {
		t.Fatalf("service state after the delete: %+v", st.Gcompose)
	}
	// Leave nothing: the foreign agreement and demand, the payments.
	_ = e.yc.TerminateAgreement(ctx, foreign, nil)
	dem, _ := e.yc.Demands(ctx)
	for _, d := range dem {
		_ = e.yc.UnsubscribeDemand(ctx, d.DemandID)
	}
	delPay := pay
	delPay.Gcompose = &protocol.RequestExt{Call: protocol.CallAction, Action: "delete", Desired: protocol.Absent, Lineage: lineage,
		Persisted: &protocol.Persisted{Identity: map[string]any{"allocation_id": alloc.AllocationID}}}
	e.call(ctx, payments.Adapter(), []string{"action", "delete"}, delPay)
	if s := e.summary(ctx); s.Agreements != 0 || s.Allocations != 0 || s.Demands != 0 {
		t.Fatalf("left: %+v", s)
	}
}

// TestSweep: objects of the app that no state names are reported by plan
// and terminated by deploy when they carry this state's lineage; another
// state's are only ever reported.
func TestSweep(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	app := `
payloads:
  db:
    runtime: vm
    params:
      image_hash: "` + dbHash + `"
networks:
  default:
    ip: "10.79.0.0/24"
services:
  db:
    payload: db
    network: default
`
	if err := os.WriteFile(desc, []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	pulled := e.must(ctx, "state", "pull")
	m := regexp.MustCompile(`"lineage":\s*"([^"]+)"`).FindStringSubmatch(pulled)
	if m == nil {
		t.Fatalf("no lineage in the state:\n%s", pulled)
	}
	lineage := m[1]

	// What an interrupted run of this state left, and another state's.
	orphanDemand, orphan := e.tagged(ctx, lineage, "op-lost", "services.ghost")
	_, foreign := e.tagged(ctx, "another-lineage", "op-other", "services.db")
	timeout := tag.Timeout(time.Now().Add(time.Hour), lineage, "op-lost")
	lostAlloc, err := e.yc.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: payments.FundedDefault}, Timeout: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	before := e.summary(ctx)

	plan := e.must(ctx, "plan", "-f", desc)
	// Leftovers are steps of the plan (deleted only once the deploy is confirmed); another state's are
	// reported and left.
	for _, want := range []string{"- delete    leftovers.agreement." + orphan, "- delete    leftovers.demand." + orphanDemand,
		"- delete    leftovers.allocation." + lostAlloc.AllocationID, "agreement " + foreign + " of another state"} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan does not report %q:\n%s", want, plan)
		}
	}
	t.Logf("plan:\n%s", plan)
	if strings.Contains(plan, "terminated") {
		t.Errorf("plan terminated something:\n%s", plan)
	}
	if s := e.summary(ctx); s != before {
		t.Fatalf("plan changed the devnet: %+v → %+v", before, s)
	}

	out := e.must(ctx, "deploy", "-f", desc, "--yes")
	for _, want := range []string{"terminate agreement " + orphan, "terminate demand " + orphanDemand, "terminate allocation " + lostAlloc.AllocationID} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy does not say %q:\n%s", want, out)
		}
	}
	t.Logf("deploy:\n%s", out)
	if strings.Contains(out, "terminate agreement "+foreign) || strings.Contains(out, "terminated agreement "+foreign) {
		t.Errorf("deploy terminated another state's agreement:\n%s", out)
	}
	if a, err := e.yc.GetAgreement(ctx, orphan); err != nil || a.State != yagna.AgreementTerminated {
		t.Errorf("orphan agreement: %s, %v", a.State, err)
	}
	if a, err := e.yc.GetAgreement(ctx, foreign); err != nil || a.State != yagna.AgreementApproved {
		t.Errorf("another state's agreement: %s, %v", a.State, err)
	}
	if _, err := e.yc.GetAllocation(ctx, lostAlloc.AllocationID); !yagna.IsGone(err) && !yagna.IsNotFound(err) {
		t.Errorf("orphan allocation: %v", err)
	}
	if s := e.summary(ctx); s.Agreements != 2 || s.Allocations != 1 || s.Demands != 1 {
		// The app's service and the foreign agreement (and its demand); the app's allocation.
		t.Errorf("after the deploy: %+v", s)
	}
	_ = e.yc.TerminateAgreement(ctx, foreign, nil)
	dem, _ := e.yc.Demands(ctx)
	for _, d := range dem {
		_ = e.yc.UnsubscribeDemand(ctx, d.DemandID)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Demands != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// TestSweepOnly: a sweep asked to terminate with sweep.only (one call per
// leftover step the user approved) ends only the objects it lists; every
// other orphan of this lineage is reported and left running. Fails before
// the adapters read sweep.only: the first call ended both agreements and
// both demands, and released the allocation.
func TestSweepOnly(t *testing.T) {
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const lineage = "lineage-only"
	demandA, agreementA := e.tagged(ctx, lineage, "op-a", "services.a")
	demandB, agreementB := e.tagged(ctx, lineage, "op-b", "services.b")
	timeout := tag.Timeout(time.Now().Add(time.Hour), lineage, "op-a")
	alloc, err := e.yc.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1", PaymentPlatform: &yagna.PaymentPlatform{Name: payments.FundedDefault}, Timeout: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	sweep := func(a sdk.Adapter, typ string, only ...string) map[string]string {
		t.Helper()
		req := protocol.Request{Type: typ, Gcompose: &protocol.RequestExt{Call: protocol.CallSweep, Lineage: lineage,
			Sweep: &protocol.SweepRequest{Known: []protocol.KnownResource{}, Terminate: true, Only: only}}}
		var res protocol.SweepResult
		if err := json.Unmarshal([]byte(e.call(ctx, a, []string{"sweep"}, req)), &res); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, o := range res.Found {
			got[o.ID] = o.Action
		}
		return got
	}
	state := func(id string) yagna.AgreementState {
		a, err := e.yc.GetAgreement(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return a.State
	}

	got := sweep(service.Adapter(), adapterNames["service"], agreementA)
	if got[agreementA] != protocol.OrphanTerminated || got[agreementB] != protocol.OrphanReported ||
		got[demandA] != protocol.OrphanReported || got[demandB] != protocol.OrphanReported {
		t.Errorf("service sweep only %s answered %v", agreementA, got)
	}
	if s := state(agreementA); s != yagna.AgreementTerminated {
		t.Errorf("the listed agreement is %s", s)
	}
	if s := state(agreementB); s != yagna.AgreementApproved {
		t.Errorf("the agreement the sweep was not asked to end is %s", s)
	}
	if s := e.summary(ctx); s.Demands != 2 {
		t.Errorf("demands after the sweep of one agreement: %+v", s)
	}
	// The next approved step: demand B alone.
	if got := sweep(service.Adapter(), adapterNames["service"], demandB); got[demandB] != protocol.OrphanTerminated || got[agreementB] != protocol.OrphanReported || got[demandA] != protocol.OrphanReported {
		t.Errorf("service sweep only %s answered %v", demandB, got)
	}
	if s := e.summary(ctx); s.Demands != 1 {
		t.Errorf("demands after the sweep of demand B: %+v", s)
	}

	// payments: an allocation is released only when listed.
	if got := sweep(payments.Adapter(), adapterNames["payments"], "another-id"); got[alloc.AllocationID] != protocol.OrphanReported {
		t.Errorf("payments sweep only another id answered %v", got)
	}
	if _, err := e.yc.GetAllocation(ctx, alloc.AllocationID); err != nil {
		t.Errorf("the allocation the sweep was not asked to release: %v", err)
	}
	if got := sweep(payments.Adapter(), adapterNames["payments"], alloc.AllocationID); got[alloc.AllocationID] != protocol.OrphanTerminated {
		t.Errorf("payments sweep only %s answered %v", alloc.AllocationID, got)
	}

	// Without only, every orphan of the lineage goes.
	got = sweep(service.Adapter(), adapterNames["service"])
	if got[agreementB] != protocol.OrphanTerminated || got[demandA] != protocol.OrphanTerminated {
		t.Errorf("service sweep of every orphan answered %v", got)
	}
	if s := e.summary(ctx); s.Agreements != 0 || s.Demands != 0 || s.Allocations != 0 {
		t.Fatalf("left: %+v", s)
	}
}
