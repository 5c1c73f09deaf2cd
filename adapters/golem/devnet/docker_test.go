package devnet_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func run(entry string, args ...string) yagna.ExeScriptCommand {
	return yagna.ExeScriptCommand{Run: &yagna.RunCommand{EntryPoint: entry, Args: args, Capture: yagna.CaptureAtEndString()}}
}

func (e *env) exec(ctx context.Context, activity string, cmds ...yagna.ExeScriptCommand) []yagna.ExeScriptCommandResult {
	e.t.Helper()
	batch, err := e.c.ExecCommands(ctx, activity, cmds...)
	if err != nil {
		e.t.Fatalf("Exec: %v", err)
	}
	res, err := e.c.WaitBatch(ctx, activity, batch, 5*time.Second)
	if err != nil {
		e.t.Fatalf("WaitBatch: %v", err)
	}
	return res
}

func (e *env) state(ctx context.Context, activity string) yagna.StateName {
	e.t.Helper()
	st, err := e.c.GetActivityState(ctx, activity)
	if err != nil || st.State[0] == nil {
		e.t.Fatalf("GetActivityState: %+v, %v", st, err)
	}
	return *st.State[0]
}

// TestRentVMWithVPN is the requestor flow end to end on real Docker: negotiate, join a VPN at an exact
// IP, deploy/start/run with captured output, a background server that outlives its exec, a TCP round
// trip through the websocket tunnel, a killed activity showing as Terminated, and cleanup.
func TestRentVMWithVPN(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)
	neg := e.rent(ctx, taskPackage(testHash))

	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.9.0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	if err := e.c.AddAddress(ctx, n.ID, "10.213.9.1"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: neg.providerID, IP: "10.213.9.7"}); err != nil {
		t.Fatal(err)
	}
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil || act.ActivityID == "" {
		t.Fatalf("CreateActivity = %+v, %v", act, err)
	}
	if st := e.state(ctx, act.ActivityID); st != yagna.StateInitialized {
		t.Errorf("state after create: %s", st)
	}
	// As the exe-unit reads a deploy (exe-unit/src/state.rs extend_networks, map_nodes → to_ip): a node
	// key in CIDR form (as GET /addresses answers the requestor's) fails the deploy and ends the batch with
	// "Net error: Invalid IP address: …"; the old devnet ignored the nodes.
	bad := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{
		ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: "10.213.9.7", Nodes: map[string]string{"10.213.9.1/24": e.srv.Identity(), "10.213.9.7": neg.providerID},
	}}}}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: []string{}}})
	if len(bad) != 1 || bad[0].Result != yagna.ResultError || !bad[0].IsBatchFinished || !strings.HasPrefix(bad[0].Message, "Net error: Invalid IP address") {
		t.Errorf("deploy with a CIDR node key = %+v, want one Error result \"Net error: Invalid IP address…\" ending the batch", bad)
	}
	// Without nodeIp the exec itself is refused: yagna parses the ExeScript into ya-client-model's Network,
	// whose nodeIp is required.
	if _, err := e.c.ExecCommands(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask}}}}); yagna.StatusOf(err) != http.StatusBadRequest {
		t.Errorf("exec of a deploy without nodeIp: %v, want 400", err)
	}
	deploy := yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{
		ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: "10.213.9.7", Nodes: map[string]string{"10.213.9.1": e.srv.Identity(), "10.213.9.7": neg.providerID},
	}}}}
	res := e.exec(ctx, act.ActivityID,
		deploy,
		yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: []string{}}},
		run("/bin/sh", "-c", "echo hello; echo oops >&2"),
		run("/bin/sh", "-c", "/devnet-db -listen :4001 > /tmp/db.log 2>&1 &"),
	)
	if len(res) != 4 || !res[3].IsBatchFinished {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Result != yagna.ResultOk {
			t.Fatalf("command %d: %+v", r.Index, r)
		}
	}
	if res[2].Stdout != "hello\n" || res[2].Stderr != "oops\n" {
		t.Errorf("captured %q / %q", res[2].Stdout, res[2].Stderr)
	}
	if st := e.state(ctx, act.ActivityID); st != yagna.StateReady {
		t.Errorf("state after start: %s", st)
	}

	// A failing command is an Error with its output, and ends the batch.
	res = e.exec(ctx, act.ActivityID, run("/bin/sh", "-c", "echo bad >&2; exit 3"), run("/bin/true"))
	if len(res) != 1 || res[0].Result != yagna.ResultError || res[0].Stderr != "bad\n" || !res[0].IsBatchFinished || !strings.Contains(res[0].Message, "3") {
		t.Errorf("failing command: %+v", res)
	}

	// The container has no Docker network (network mode none): its VPN is a TUN device devnet-init made,
	// holding its node IP, with the VPN's range routed there and no default route (see vpnrelay.go).
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet.activity="+act.ActivityID))})
	if err != nil || len(cs) != 1 {
		t.Fatalf("activity containers: %d, %v", len(cs), err)
	}
	insp, err := e.docker.ContainerInspect(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if insp.HostConfig.NetworkMode != "none" {
		t.Errorf("the container's network mode is %q, want none", insp.HostConfig.NetworkMode)
	}
	res = e.exec(ctx, act.ActivityID, run("/bin/sh", "-c", "ip -o -4 addr show; echo --; ip -4 route show"))
	if len(res) != 1 || res[0].Result != yagna.ResultOk {
		t.Fatalf("addresses in the container: %+v", res)
	}
	addrs, routes, _ := strings.Cut(res[0].Stdout, "--\n")
	devs := map[string]string{} // address → interface
	for _, line := range strings.Split(addrs, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[2] == "inet" {
			devs[f[3]] = f[1]
		}
	}
	if devs["10.213.9.7/24"] != "vpn0" || len(devs) != 2 {
		t.Errorf("the container's addresses are not lo's and 10.213.9.7/24 on vpn0:\n%s", addrs)
	}
	if strings.Contains(routes, "default") || !strings.Contains(routes, "10.213.9.0/24 dev vpn0") {
		t.Errorf("the container's routes are not the VPN's range on vpn0 alone:\n%s", routes)
	}

	// A VM's kernel limits, not the engine's (which an engine that cannot raise its own fails to set).
	if res := e.exec(ctx, act.ActivityID, run("/bin/sh", "-c", "ulimit -n; ulimit -Hn")); len(res) != 1 || res[0].Stdout != "1024\n4096\n" {
		t.Errorf("open-file limits in the container: %+v, want 1024 soft, 4096 hard", res)
	}

	// TCP through the websocket tunnel to the server started in the background.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.c.DialTCPConn(ctx, n.ID, "10.213.9.7", 4001)
	}, DisableKeepAlives: true}}
	var status int
	for i := 0; i < 50; i++ { // the server may take a moment to listen
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://db/db/greeting", strings.NewReader("hello through the tunnel"))
		resp, err := hc.Do(req)
		if err == nil {
			status = resp.StatusCode
			resp.Body.Close()
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if status != http.StatusNoContent {
		t.Fatalf("PUT through the tunnel: status %d", status)
	}
	resp, err := hc.Get("http://db/db/greeting")
	if err != nil {
		t.Fatalf("GET through the tunnel: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello through the tunnel" {
		t.Errorf("read back %q", body)
	}
	// A large payload round trip (several websocket messages).
	big := strings.Repeat("0123456789abcdef", 64<<10)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://db/db/big", strings.NewReader(big))
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT big: %v", err)
	}
	resp, err = hc.Get("http://db/db/big")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(body) != len(big) || string(body) != big {
		t.Errorf("big payload: %d bytes back, want %d", len(body), len(big))
	}
	// The websocket also takes the key as ?authToken= (no Authorization header).
	wsURL, err := e.c.TCPURL(n.ID, "10.213.9.7", 4001)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := websocket.Dial(ctx, wsURL+"?authToken="+testKey, nil)
	if err != nil {
		t.Fatalf("websocket with ?authToken=: %v", err)
	}
	conn := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	if _, err := io.WriteString(conn, "GET /db/greeting HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasPrefix(string(raw), "HTTP/1.0 200") || !strings.HasSuffix(string(raw), "hello through the tunnel") {
		t.Errorf("raw HTTP through the tunnel: %q", raw)
	}
	if _, err := e.c.DialTCPConn(ctx, n.ID, "10.213.9.99", 4001); !yagna.IsNotFound(err) {
		t.Errorf("tunnel to an address nobody holds: %v, want 404", err)
	}

	// Killing the container behind the requestor's back: the activity is Terminated.
	if status, b := e.raw("POST", fmt.Sprintf("%s/activities/%s/kill", devnet.AdminPrefix, act.ActivityID), testKey, nil); status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", status, b)
	}
	if st := e.state(ctx, act.ActivityID); st != yagna.StateTerminated {
		t.Errorf("state after kill: %s", st)
	}
	if _, err := e.c.ExecCommands(ctx, act.ActivityID, run("/bin/true")); err == nil {
		t.Errorf("exec on a terminated activity succeeded")
	}
	// The dead activity's address is free (its container is gone): a new activity of the agreement takes
	// it again, even before the dead one is destroyed.
	act2, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res = e.exec(ctx, act2.ActivityID, deploy, yagna.ExeScriptCommand{Start: &yagna.StartCommand{}}, run("/bin/sh", "-c", "echo again"))
	if len(res) != 3 || res[2].Stdout != "again\n" {
		t.Errorf("second activity at the same IP: %+v", res)
	}
	if err := e.c.DestroyActivity(ctx, act.ActivityID); err != nil {
		t.Errorf("DestroyActivity: %v", err)
	}
	if err := e.c.TerminateAgreement(ctx, neg.agreement, yagna.TerminationReason("done")); err != nil {
		t.Errorf("TerminateAgreement: %v", err)
	}
}

// TestActivityLifecycle covers deploy without a VPN, an unknown image hash, terminate via ExeScript and
// destroy removing the container.
func TestActivityLifecycle(t *testing.T) {
	e := start(t, devnet.Config{})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)

	// An image hash nobody answers for: deploy fails with a clear message.
	neg := e.rent(ctx, taskPackage(strings.Repeat("ab", 28)))
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res := e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}})
	if len(res) != 1 || res[0].Result != yagna.ResultError || !strings.Contains(res[0].Message, "golem.image.hash") {
		t.Errorf("deploy of an unknown image: %+v", res)
	}

	neg = e.rent(ctx, taskPackage(testHash))
	act, err = e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	res = e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{}},
		run("/bin/sh", "-c", "sleep 0.3; echo done"))
	if len(res) != 3 || res[2].Stdout != "done\n" {
		t.Fatalf("results %+v", res)
	}
	checkTrace(t, e.srv, act.ActivityID)
	// The same results as an event stream.
	batch, err := e.c.ExecCommands(ctx, act.ActivityID, run("/bin/sh", "-c", "echo streamed"), run("/bin/sh", "-c", "exit 4"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/activity-api/v1/activity/"+act.ActivityID+"/exec/"+batch, nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"event: runtime\ndata: {", `"stdout":{"str":"streamed\n"}`, `"returnCode":4`, `"started":{"command":{"run":`} {
		if !strings.Contains(string(stream), want) {
			t.Errorf("event stream lacks %s:\n%s", want, stream)
		}
	}
	// With commandIndex, as the exe-unit (exe-unit/src/handlers/rpc.rs Handler<GetExecBatchResults>): the
	// results up to that command, and 408 {"message":"Timeout"} when it is not reached in time (the old
	// devnet answered every result, and 200 with partial results).
	slow, err := e.c.ExecCommands(ctx, act.ActivityID, run("/bin/sh", "-c", "echo one"), run("/bin/sh", "-c", "sleep 3; echo two"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.ExecBatchResults(ctx, act.ActivityID, slow, 100*time.Millisecond, 1); !yagna.IsTimeout(err) {
		t.Errorf("results up to a command not reached in time = %+v, %v; want 408", got, err)
	}
	if got, err := e.c.ExecBatchResults(ctx, act.ActivityID, slow, 2*time.Second, 0); err != nil || len(got) != 1 || got[0].Stdout != "one\n" {
		t.Errorf("results up to command 0 = %+v, %v; want that one result", got, err)
	}
	if _, err := e.c.WaitBatch(ctx, act.ActivityID, slow, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if u, err := e.c.GetActivityUsage(ctx, act.ActivityID); err != nil || len(u.CurrentUsage) != 2 {
		t.Errorf("GetActivityUsage = %+v, %v", u, err)
	}
	if agr, err := e.c.GetActivityAgreement(ctx, act.ActivityID); err != nil || agr != neg.agreement {
		t.Errorf("GetActivityAgreement = %q, %v", agr, err)
	}
	res = e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Terminate: &struct{}{}})
	if len(res) != 1 || res[0].Result != yagna.ResultOk {
		t.Errorf("terminate: %+v", res)
	}
	if st := e.state(ctx, act.ActivityID); st != yagna.StateTerminated {
		t.Errorf("state after terminate: %s", st)
	}
	cs, _ := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet.activity="+act.ActivityID))})
	if len(cs) != 0 {
		t.Errorf("terminated activity's container still there")
	}
	// yagna answers 500 "DAO error: Not found: agreement id for activity: <id>" for an unknown activity
	// (core/activity/src/dao/activity.rs, error.rs); the client reports it as not found.
	if code, body := e.raw(http.MethodDelete, "/activity-api/v1/activity/nope", testKey, nil); code != http.StatusInternalServerError || !strings.Contains(string(body), "DAO error: Not found: agreement id for activity: nope") {
		t.Errorf("DELETE of an unknown activity = %d %s, want 500 DAO error: Not found", code, body)
	}
	if err := e.c.DestroyActivity(ctx, "nope"); !yagna.IsNotFound(err) {
		t.Errorf("destroy unknown: %v, want it reported as not found", err)
	}
}

// TestDebitNotes: debit notes arrive while an activity runs and accepting them charges the allocation;
// once they go unaccepted past the timeout the provider terminates the agreement and invoices it.
func TestDebitNotes(t *testing.T) {
	e := start(t, devnet.Config{
		DebitNoteInterval:      devnet.Duration{Duration: 300 * time.Millisecond},
		DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}, // the least a provider takes
		Providers:              []devnet.ProviderConfig{{Name: "p", Coeffs: []float64{0.01, 0.02, 0.5}}},
	})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)
	neg := e.rent(ctx, taskPackage(testHash))
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(ctx, act.ActivityID, yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{}}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{}})

	// Accept debit notes for a while: longer than the accept timeout, the agreement stays.
	var after time.Time
	accepted := 0
	lastDue, lastNote := 0.0, ""
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		evs, err := e.c.DebitNoteEvents(ctx, time.Second, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			after = ev.EventDate
			if ev.EventType != "DebitNoteReceivedEvent" {
				continue
			}
			dn, err := e.c.GetDebitNote(ctx, ev.DebitNoteID)
			if err != nil || dn.AgreementID != neg.agreement || dn.ActivityID != act.ActivityID {
				t.Fatalf("GetDebitNote = %+v, %v", dn, err)
			}
			due, _ := strconv.ParseFloat(dn.TotalAmountDue, 64)
			if due <= lastDue || due < 0.5 || dn.PreviousDebitNoteID != lastNote {
				t.Errorf("debit note %s: due %s after %g (start price 0.5), previous %q want %q", dn.DebitNoteID, dn.TotalAmountDue, lastDue, dn.PreviousDebitNoteID, lastNote)
			}
			// As a provider sends it: an array of numbers in the order of the offer's usage vector
			// (agent/provider/src/payments/payments.rs send_debit_note); the old devnet sent an object.
			if len(dn.UsageCounterVector) != 2 || dn.UsageCounterVector[0] <= 0 || dn.UsageCounterVector[1] <= 0 {
				t.Errorf("debit note %s: usageCounterVector %v, want [cpu_sec duration_sec] both > 0", dn.DebitNoteID, dn.UsageCounterVector)
			}
			lastDue, lastNote = due, dn.DebitNoteID
			if err := e.c.AcceptDebitNote(ctx, dn.DebitNoteID, yagna.DebitNoteAcceptance{TotalAmountAccepted: dn.TotalAmountDue, AllocationID: neg.alloc.AllocationID}, 5*time.Second); err != nil {
				t.Fatalf("AcceptDebitNote: %v", err)
			}
			accepted++
		}
	}
	if accepted < 3 {
		t.Fatalf("%d debit notes in 6s at a 300ms interval", accepted)
	}
	ag, err := e.c.GetAgreement(ctx, neg.agreement)
	if err != nil || ag.State != yagna.AgreementApproved {
		t.Fatalf("agreement after accepting debit notes: %s, %v", ag.State, err)
	}
	// The offer as a real provider publishes it: the usage vector in its preset's BTreeMap order
	// (agent/provider/src/config/presets.rs), the coefficients in that order and the start price last
	// (payments/pricing.rs LinearPricingOffer::build); configured as [per duration s, per CPU s, start].
	if v, c := fmt.Sprint(ag.Offer.Properties["golem.com.usage.vector"]), fmt.Sprint(ag.Offer.Properties["golem.com.pricing.model.linear.coeffs"]); v != "[golem.usage.cpu_sec golem.usage.duration_sec]" || c != "[0.02 0.01 0.5]" {
		t.Errorf("offer usage vector %s, coeffs %s; want [golem.usage.cpu_sec golem.usage.duration_sec], [0.02 0.01 0.5]", v, c)
	}
	alloc, err := e.c.GetAllocation(ctx, neg.alloc.AllocationID)
	if err != nil || alloc.SpentAmount == "0" {
		t.Errorf("allocation after accepting: %+v, %v", alloc, err)
	}

	// Stop accepting: the provider terminates the agreement.
	start := time.Now()
	var terminated *yagna.AgreementOperationEvent
	for terminated == nil && time.Since(start) < 15*time.Second {
		evs, err := e.c.AgreementEvents(ctx, time.Second, time.Time{}, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			if evs[i].EventType == "AgreementTerminatedEvent" && evs[i].AgreementID == neg.agreement {
				terminated = &evs[i]
			}
		}
	}
	if terminated == nil || terminated.Terminator != "Provider" {
		t.Fatalf("no AgreementTerminatedEvent by the Provider: %+v", terminated)
	}
	if d := time.Since(start); d < 4*time.Second {
		t.Errorf("terminated after %s, before the 5s accept timeout could pass", d)
	}
	if st := e.state(ctx, act.ActivityID); st != yagna.StateTerminated {
		t.Errorf("activity state after the provider terminated: %s", st)
	}
	invs, err := e.c.Invoices(ctx, time.Time{}, 10)
	if err != nil || len(invs) != 1 || invs[0].AgreementID != neg.agreement {
		t.Fatalf("Invoices = %+v, %v", invs, err)
	}
	if err := e.c.AcceptInvoice(ctx, invs[0].InvoiceID, yagna.Acceptance{TotalAmountAccepted: invs[0].Amount, AllocationID: neg.alloc.AllocationID}, 5*time.Second); err != nil {
		t.Fatalf("AcceptInvoice: %v", err)
	}
	alloc, err = e.c.GetAllocation(ctx, neg.alloc.AllocationID)
	if err != nil || alloc.SpentAmount != invs[0].Amount {
		t.Errorf("allocation spent %s, invoice %s (%v)", alloc.SpentAmount, invs[0].Amount, err)
	}
}

// TestLeftoversRemovedAtStart: a devnet removes the containers and networks of its instance that an
// earlier run left behind.
func TestLeftoversRemovedAtStart(t *testing.T) {
	base := start(t, devnet.Config{}) // builds nothing; gives a Docker client and an instance name
	db := buildProviderImage(t, base.docker)
	ctx := ctxT(t, time.Minute)
	docker, instance := base.docker, base.instance+"-old"
	labels := map[string]string{"gcompose.devnet": instance, "gcompose.test": t.Name()}
	nw, err := docker.NetworkCreate(ctx, "gcompose-devnet-"+instance, network.CreateOptions{Internal: true, Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	// What a devnet of two Docker networks per VPN left: a macvlan network hung off an internal bridge's
	// Linux bridge, which must go first.
	dev := "gcvt" + strconv.FormatInt(time.Now().UnixNano()%1e10, 36)
	anchor, err := docker.NetworkCreate(ctx, "gcompose-devnet-"+instance+"-vpn-anchor", network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels,
		Options: map[string]string{"com.docker.network.bridge.name": dev}})
	if err != nil {
		t.Fatal(err)
	}
	link, err := docker.NetworkCreate(ctx, "gcompose-devnet-"+instance+"-vpn", network.CreateOptions{Driver: "macvlan", Labels: labels,
		Options: map[string]string{"parent": dev, "macvlan_mode": "bridge"}})
	if err != nil {
		_ = docker.NetworkRemove(ctx, anchor.ID)
		t.Fatal(err)
	}
	c, err := docker.ContainerCreate(ctx, &container.Config{Image: db, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := devnet.New(ctx, devnet.Options{Config: devnet.Config{Instance: instance}, AppKey: testKey, Docker: docker})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	if _, err := docker.ContainerInspect(ctx, c.ID); err == nil {
		t.Errorf("leftover container %s still there", c.ID[:12])
	}
	for _, id := range []string{nw.ID, link.ID, anchor.ID} {
		if _, err := docker.NetworkInspect(ctx, id, network.InspectOptions{}); err == nil {
			t.Errorf("leftover network %s still there", id[:12])
			_ = docker.NetworkRemove(context.Background(), id)
		}
	}
}

// checkTrace checks what the devnet traced of an activity whose first batch was deploy, start and a run of
// "sleep 0.3": the batch after the activity's creation, the commands in order after it, each with the
// engine calls it made, the run's process at least its 0.3 s.
func checkTrace(t *testing.T, srv *devnet.Server, activity string) {
	t.Helper()
	var tr *devnet.ActivityTrace
	for _, a := range srv.ActivityTraces() {
		if a.ID == activity {
			tr = &a
		}
	}
	if tr == nil || len(tr.Batches) != 1 || len(tr.Batches[0].Commands) != 3 {
		t.Fatalf("trace of activity %s = %+v, want one batch of 3 commands", activity, tr)
	}
	b := tr.Batches[0]
	if b.Posted.Before(tr.Created) {
		t.Errorf("batch posted at %s, before the activity was created at %s", b.Posted, tr.Created)
	}
	last := b.Posted
	wants := []struct{ name, step string }{{"deploy", "ContainerCreate"}, {"start", "ContainerStart"}, {"run", "exec"}}
	for i, c := range b.Commands {
		if c.Name != wants[i].name || c.Start.Before(last) || c.End.Before(c.Start) {
			t.Errorf("command %d: %s from %s to %s (the previous ended at %s), want %s after it", i, c.Name, c.Start, c.End, last, wants[i].name)
		}
		last = c.End
		var took time.Duration
		for _, st := range c.Steps {
			if st.Name == wants[i].step {
				took += st.Took
			}
		}
		if took <= 0 || took > c.End.Sub(c.Start) {
			t.Errorf("command %s: step %s took %s of the command's %s (steps %+v)", c.Name, wants[i].step, took, c.End.Sub(c.Start), c.Steps)
		}
		if c.Name == "run" && took < 300*time.Millisecond {
			t.Errorf("the run of sleep 0.3 took %s in its exec step", took)
		}
	}
	if !b.Finished().Equal(last) {
		t.Errorf("batch finished at %s, its last command ended at %s", b.Finished(), last)
	}
}
