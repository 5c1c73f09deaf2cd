package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/lowering"
	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/resolve"
	"github.com/gcompose/gcompose/protocol"
)

// The rules tests of issue 10 (docs/golem.md, "Rules of the real network"):
// for each, the devnet does what yagna or a real provider does, and the
// adapter code is driven in-process (inproc_test.go) through its protocol
// entry point against it.

// fast are the service timeouts of these tests: short enough to see a
// wait give up, long enough for a loaded machine.
var fast = service.Timeouts{Negotiation: 30 * time.Second, Approval: 10 * time.Second, Deploy: time.Minute, Exec: 30 * time.Second}

func (e *env) admin(ctx context.Context, method, path string, body any) {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, method, e.url+devnet.AdminPrefix+path, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+appKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("%s %s %v: HTTP %d", method, path, body, resp.StatusCode)
	}
}

func (e *env) faults(ctx context.Context, f map[string]any) {
	e.t.Helper()
	e.admin(ctx, "PUT", "/faults", f)
}

func (e *env) offline(ctx context.Context, provider string, status int) {
	e.t.Helper()
	e.admin(ctx, "PUT", "/providers/"+provider, map[string]any{"offline": status})
}

// keeper runs the payments keeper in-process until the test ends (or stop
// is called).
func (e *env) keeper(alloc string) (k *payments.Keeper, stop func()) {
	k = &payments.Keeper{YC: yagna.New(e.url, appKey), App: e.app, Allocation: alloc, Rescan: 2 * time.Second,
		Log: testLogger(e.t)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := k.Run(ctx, func() { close(ready) }); err != nil && ctx.Err() == nil {
			e.t.Errorf("keeper: %v", err)
		}
	}()
	select {
	case <-ready:
	case <-done:
	case <-time.After(30 * time.Second):
		e.t.Fatal("keeper not ready")
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return k, stop
}

func (e *env) service(name string, t service.Timeouts, cfg map[string]any) *resource {
	return &resource{e: e, adapter: service.AdapterWith(t), name: "services." + name, config: cfg}
}

// cleanupService deletes a service at the end of the test, whatever it left.
func (e *env) cleanupService(r *resource) {
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.call(ctx, protocol.Absent, "action", "delete")
	})
}

// Rule: exec-result polls get GSB 500s, 504s and 408s on a real network
// (yapapi/rest/activity.py, golem-js exe-script-executor.ts retry them).
func TestCreateRidesOutExecPollErrors(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.faults(ctx, map[string]any{"execPollErrors": []int{500, 504, 500, 408, 500, 504}})
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, "", []string{"/bin/sh", "-c", "echo ready"}))
	e.cleanupService(db)
	if o := db.action(ctx, "create"); o.exit != 0 {
		t.Fatalf("create through transient exec-poll errors failed:\n%s", o)
	}
	if s := db.state(ctx); s.exit != 0 || s.state.Status != protocol.Valid {
		t.Fatalf("state after create: %s", s)
	}
}

// Rule: a provider downloads the image during deploy: minutes on a real
// network; the deploy has its own limit (Timeouts.Deploy, param
// deploy_timeout), not the init commands'.
func TestCreateAllowsImageDownloadTime(t *testing.T) {
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.faults(ctx, map[string]any{"imageDownload": "5s"})
	tm := fast
	tm.Exec = 2 * time.Second
	db := e.service("db", tm, serviceConfig("db", dbHash, alloc, nil, "", []string{"/bin/sh", "-c", "echo ready"}))
	e.cleanupService(db)
	if o := db.action(ctx, "create"); o.exit != 0 {
		t.Fatalf("create with a 5 s image download (init commands limited to 2 s) failed:\n%s", o)
	}
	// A payload that says its image takes longer than it may is told so.
	tm.Deploy = time.Second
	web := e.service("web", tm, serviceConfig("web", webHash, alloc, nil, ""))
	e.cleanupService(web)
	if o := web.action(ctx, "create"); o.exit == 0 || !strings.Contains(o.stderr, "not finished within") {
		t.Fatalf("create with a deploy limit below the download: %s", o)
	}
}

// Rule: when a provider fails after the agreement (here: its image download
// fails), the create tries the next provider instead of failing the deploy.
func TestCreateTriesTheNextProvider(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.faults(ctx, map[string]any{"deployErrors": 2})
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	o := db.action(ctx, "create")
	if o.exit != 0 {
		t.Fatalf("create with two providers failing the deploy:\n%s", o)
	}
	if n := strings.Count(o.stdout, "trying another provider"); n != 2 {
		t.Errorf("%d provider changes said, want 2:\n%s", n, o.stdout)
	}
	failed, _ := db.persisted.Identity["failed_providers"].([]any)
	if len(failed) != 2 || slices.Contains(failed, any(db.id("provider_id"))) {
		t.Errorf("failed providers %v, running on %s", failed, db.id("provider_id"))
	}
	if s := e.summary(ctx); s.Agreements != 1 || s.Activities != 1 || s.PendingAgreements != 0 {
		t.Errorf("after the create: %+v, want exactly one rental", s)
	}
	// Three failures in a row fail the create, naming each provider's error.
	e.faults(ctx, map[string]any{"deployErrors": 3})
	web := e.service("web", fast, serviceConfig("web", webHash, alloc, nil, ""))
	e.cleanupService(web)
	if o := web.action(ctx, "create"); o.exit == 0 || strings.Count(o.stderr, "image download failed") != 3 {
		t.Fatalf("create with every provider failing: %s", o)
	}
	if s := e.summary(ctx); s.Agreements != 1 {
		t.Errorf("after the failed create: %+v, want only db's rental", s)
	}
}

// Rule: yagna answers 408/500 for the state of an activity whose provider it
// cannot reach (core/activity/src/api.rs): the provider is gone, a drift to
// rebuild; yagna itself unreachable is an error.
func TestOfflineProviderIsDrift(t *testing.T) {
	e := startDevnet(t, devnet.Config{DebitNoteInterval: devnet.Duration{Duration: time.Second}, DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.keeper(alloc)
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	db.mustAct(ctx, "create")
	first, firstAgreement := db.id("provider_id"), db.id("agreement_id")

	offlineAt := time.Now()
	for _, status := range []int{500, 408} {
		e.offline(ctx, first, status)
		s := db.state(ctx)
		if s.exit != 0 {
			t.Fatalf("state with the provider offline (%d) failed instead of reporting drift:\n%s", status, s)
		}
		if s.state.Status != protocol.Stale || s.state.Gcompose.Change != protocol.ChangeRebuild || !strings.Contains(s.state.Gcompose.Reason, "unreachable") {
			t.Fatalf("state with the provider offline (%d): %+v %+v", status, s.state, s.state.Gcompose)
		}
	}
	// yagna itself down is an error, not a drift.
	down := *db
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	down.e = &env{t: t, url: "http://" + closed, app: e.app}
	if s := down.state(ctx); s.exit == 0 || !strings.Contains(s.stderr, "connection refused") {
		t.Fatalf("state with yagna down: %s", s)
	}

	// The rebuild: delete does not stop at the unreachable provider, create rents another.
	if o := db.action(ctx, "delete"); o.exit != 0 || !strings.Contains(o.stdout, "unreachable") {
		t.Fatalf("delete with the provider unreachable: %s", o)
	}
	db.mustAct(ctx, "create")
	if db.id("provider_id") == first {
		t.Fatalf("rebuilt on the unreachable provider %s", first)
	}
	if s := db.state(ctx); s.exit != 0 || s.state.Status != protocol.Valid {
		t.Fatalf("state after the rebuild: %s", s)
	}
	// Back online after longer than its accept timeout, the provider ends its
	// agreement itself: nothing of the old rental is left.
	time.Sleep(time.Until(offlineAt.Add(5500 * time.Millisecond)))
	e.offline(ctx, first, 0)
	if a, err := e.yc.GetAgreement(ctx, firstAgreement); err != nil || a.State != yagna.AgreementTerminated {
		t.Fatalf("old agreement: %s, %v", a.State, err)
	}
	if s := e.summary(ctx); s.Agreements != 1 || s.Activities != 1 {
		t.Fatalf("after the provider came back: %+v, want only the new rental", s)
	}
}

// Rule: an agreement that was never approved is cancelled, not terminated
// (terminate answers 409/410: core/market/src/db/model/agreement.rs); left
// Pending it holds the provider until it expires.
func TestUnapprovedAgreementsCancelled(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.faults(ctx, map[string]any{"approvalDelay": "1h"})
	tm := fast
	tm.Negotiation, tm.Approval = 8*time.Second, time.Second
	db := e.service("db", tm, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	if o := db.action(ctx, "create"); o.exit == 0 || !strings.Contains(o.stderr, "no provider agreed") {
		t.Fatalf("create with providers that never approve: %s", o)
	}
	if s := e.summary(ctx); s.PendingAgreements != 0 || s.Agreements != 0 {
		t.Fatalf("after the create gave up: %+v, want no pending agreement left", s)
	}
}

// Rule: a debit note whose accept failed must be accepted later, or the
// provider ends the agreement at its accept timeout
// (agent/provider/src/payments/payments.rs DebitNotesDeadline).
func TestKeeperRetriesFailedAccepts(t *testing.T) {
	e := startDevnet(t, devnet.Config{DebitNoteInterval: devnet.Duration{Duration: time.Second}, DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	k, _ := e.keeper(alloc)
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	db.mustAct(ctx, "create")
	e.faults(ctx, map[string]any{"acceptErrors": []int{500, 500, 504, 500}})
	time.Sleep(12 * time.Second)
	a, err := e.yc.GetAgreement(ctx, db.id("agreement_id"))
	if err != nil || a.State != yagna.AgreementApproved {
		t.Fatalf("agreement 12 s after four failed accepts (accept timeout 5 s): %s, %v", a.State, err)
	}
	if n := k.Pending(); n != 0 {
		t.Errorf("%d accepts still waiting for a retry", n)
	}
	notes, err := e.yc.DebitNotes(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if n.Status == yagna.StatusReceived && time.Since(n.Timestamp) > 4*time.Second {
			t.Errorf("debit note %s still unaccepted %s after it came", n.DebitNoteID, time.Since(n.Timestamp))
		}
	}
}

// Rule: destroy waits (bounded) for the final invoices of the ended
// agreements before it releases the allocation (yapapi/engine.py _shutdown
// waits 30 s); an invoice that comes after the release cannot be paid.
func TestDestroyWaitsForFinalInvoices(t *testing.T) {
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	_, stopKeeper := e.keeper(alloc)
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	db.mustAct(ctx, "create")
	e.faults(ctx, map[string]any{"invoiceDelay": "3s"})
	if o := db.call(ctx, protocol.Absent, "action", "delete"); o.exit != 0 {
		t.Fatalf("delete: %s", o)
	}
	stopKeeper() // destroy removes the keeper with the payments resource
	pay := &resource{e: e, adapter: payments.Adapter(), name: lowering.PaymentsResource,
		config:    map[string]any{"budget": "50", "platform": "erc20-hoodi-tglm"},
		persisted: protocol.Persisted{Identity: map[string]any{"allocation_id": alloc}}}
	start := time.Now()
	if o := pay.call(ctx, protocol.Absent, "action", "delete"); o.exit != 0 {
		t.Fatalf("payments delete: %s", o)
	}
	// Whenever the invoice came, it must be paid.
	for {
		invs, err := e.yc.Invoices(ctx, time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(invs) > 0 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatal("no invoice 15 s after the destroy (invoiceDelay 3s)")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := e.summary(ctx); s.UnpaidInvoices != 0 || s.Allocations != 0 {
		t.Fatalf("after destroy (%s): %+v, want the invoice paid and the allocation released", time.Since(start), s)
	}
}

// Rule: VPN addresses are planned once (adapters/golem/lowering), because yagna answers
// 200 to an add at a taken address and keeps the holder
// (core/vpn/src/network.rs); the adapter checks the node map after adding.
func TestParallelCreatesGetTheirPlannedAddresses(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.keeper(alloc)
	src := `
payloads:
  p: {runtime: vm, params: {image_hash: "` + dbHash + `"}}
networks:
  default: {ip: "10.79.0.1/24"}
services:
  s: {payload: p, network: default, instances: 4}
  x: {payload: p, network: default}
`
	file := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	app, diags := descriptor.Load(ctx, descriptor.Options{}, file)
	if len(diags.Errors()) > 0 {
		t.Fatal(diags)
	}
	rs, rd := resolve.Resolve(app, resolve.Options{Outputs: lowering.Outputs()})
	if len(rd.Errors()) > 0 {
		t.Fatal(rd)
	}
	lowered, err := lowering.Resources(rs, lowering.Images{})
	if err != nil {
		t.Fatal(err)
	}
	vpn := &resource{e: e, adapter: network.Adapter(), name: "networks.default", config: lowered["networks.default"].Config}
	vpn.mustAct(ctx, "create")
	t.Cleanup(func() { _ = vpn.call(context.Background(), protocol.Absent, "action", "delete") })

	var svcs []*resource
	for i := range 4 {
		name := fmt.Sprintf("services.s[%d]", i)
		ip, _ := lowered[name].Config[lowering.NodeIPKey].(string)
		cfg := serviceConfig(name, dbHash, alloc, vpn, ip)
		// One provider each: no create waits for another's, so they stay in step.
		cfg["payload"].(map[string]any)["constraints"] = []any{"golem.node.id.name=" + []string{"small-0", "small-1", "large-0", "large-1"}[i]}
		r := e.service(fmt.Sprintf("s[%d]", i), fast, cfg)
		e.cleanupService(r)
		svcs = append(svcs, r)
	}
	// Latency as on a real network keeps the parallel creates in step, so
	// that they look for a free address at the same moment.
	e.faults(ctx, map[string]any{"slow": "150ms"})
	var wg sync.WaitGroup
	outs := make([]outcome, len(svcs))
	for i, r := range svcs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = r.action(ctx, "create") }()
	}
	wg.Wait()
	e.faults(ctx, map[string]any{})
	nodes, err := e.yc.Nodes(ctx, vpn.id("network_id"))
	if err != nil {
		t.Fatal(err)
	}
	holder := map[string]string{}
	for _, n := range nodes {
		holder[n.IP] = n.ID
	}
	for i, r := range svcs {
		if outs[i].exit != 0 {
			t.Errorf("%s create: %s", r.name, outs[i])
			continue
		}
		planned, _ := r.config["node_ip"].(string)
		if r.id("ip") != planned || holder[planned] != r.id("provider_id") {
			t.Errorf("%s: at %s, planned %s, held in the node map by %s (provider %s)", r.name, r.id("ip"), planned, holder[planned], r.id("provider_id"))
		}
	}
	// Another node at x's planned address: yagna answers 200 and keeps it;
	// the create sees it in the node map and says who holds it.
	xip, _ := lowered["services.x"].Config[lowering.NodeIPKey].(string)
	if err := e.yc.AddNode(ctx, vpn.id("network_id"), yagna.Node{ID: "0x00000000000000000000000000000000000f0e19", IP: xip}); err != nil {
		t.Fatalf("add a node at a taken address: %v", err)
	}
	x := e.service("x", fast, serviceConfig("services.x", dbHash, alloc, vpn, xip))
	e.cleanupService(x)
	if o := x.action(ctx, "create"); o.exit == 0 || !strings.Contains(o.stderr, "held by node 0x00000000000000000000000000000000000f0e19") {
		t.Fatalf("create at an address another node holds: %s", o)
	}
}

// Rule (consequence of the one above): an agreement whose provider yagna
// cannot reach cannot be ended, so the sweep reports it instead of failing
// the deploy or destroy it runs before.
func TestSweepReportsUnreachableProviders(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	e.keeper(alloc)
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	db.mustAct(ctx, "create")
	provider, agreement := db.id("provider_id"), db.id("agreement_id")
	e.offline(ctx, provider, 500)
	t.Cleanup(func() { e.offline(context.Background(), provider, 0) })
	if o := db.call(ctx, protocol.Absent, "action", "delete"); o.exit != 0 {
		t.Fatalf("delete with the provider unreachable: %s", o)
	}
	sw := &resource{e: e, adapter: service.AdapterWith(fast), name: "", sweep: &protocol.SweepRequest{Known: []protocol.KnownResource{}, Terminate: true}}
	o := sw.call(ctx, protocol.Present, "sweep")
	if o.exit != 0 {
		t.Fatalf("sweep with an unreachable provider's agreement failed:\n%s", o)
	}
	found := false
	for _, f := range o.sweep.Found {
		if f.ID == agreement {
			found = true
			if f.Action != protocol.OrphanReported || !strings.Contains(f.Detail, "unreachable") {
				t.Errorf("agreement %s of the unreachable provider: %+v, want reported as unreachable", agreement, f)
			}
		}
	}
	if !found {
		t.Fatalf("sweep did not find agreement %s: %+v", agreement, o.sweep.Found)
	}
}
