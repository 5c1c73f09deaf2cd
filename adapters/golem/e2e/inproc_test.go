package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// resource is one resource driven in-process through an adapter's real
// protocol entry point (sdk.Run: the request as JSON on stdin, the answer
// and the identity lines on stdout) against the devnet over HTTP, the way
// gcompose drives the adapter image, with the persisted identity carried
// from call to call as the engine does. The rules tests use it to set
// timeouts and to run the old and the new adapter code against the same
// devnet faults.
type resource struct {
	e         *env
	adapter   sdk.Adapter
	name      string
	config    map[string]any
	persisted protocol.Persisted
	stale     json.RawMessage
	// sweep is the question of a sweep call.
	sweep *protocol.SweepRequest
}

// outcome is what one call printed and answered.
type outcome struct {
	exit   int
	stdout string
	stderr string
	state  *protocol.StateResult
	sweep  *protocol.SweepResult
}

func (o outcome) String() string {
	return "exit " + itoa(o.exit) + "\nstdout:\n" + o.stdout + "\nstderr:\n" + o.stderr
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func (r *resource) call(ctx context.Context, desired string, args ...string) outcome {
	r.e.t.Helper()
	callKind := protocol.CallState
	action := ""
	switch {
	case len(args) == 2:
		callKind, action = protocol.CallAction, args[1]
	case len(args) == 1 && args[0] == sdk.SweepArg:
		callKind = protocol.CallSweep
	}
	p := r.persisted
	req := protocol.Request{Name: r.name, Type: "inproc/" + r.name, Version: "1", Config: r.config, StaleState: r.stale,
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, App: r.e.app, Lineage: r.e.app + "-lineage", Call: callKind, Action: action, Desired: desired,
			Persisted: &p, Env: map[string]string{"YAGNA_API_URL": r.e.url, "GOLEM_REGISTRY_URL": r.e.url, "YAGNA_APPKEY": appKey}, Sweep: r.sweep}}
	in, err := json.Marshal(req)
	if err != nil {
		r.e.t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	exit := sdk.Run(ctx, r.adapter, args, bytes.NewReader(in), &stdout, &stderr)
	o := outcome{exit: exit, stdout: stdout.String(), stderr: stderr.String()}
	if callKind == protocol.CallSweep {
		if exit == 0 {
			o.sweep = &protocol.SweepResult{}
			if err := json.Unmarshal(stdout.Bytes(), o.sweep); err != nil {
				r.e.t.Fatalf("sweep answer of %s: %v\n%s", r.name, err, stdout.String())
			}
		}
		return o
	}
	if callKind == protocol.CallState {
		if exit == 0 {
			o.state = &protocol.StateResult{}
			if err := json.Unmarshal(stdout.Bytes(), o.state); err != nil {
				r.e.t.Fatalf("state answer of %s: %v\n%s", r.name, err, stdout.String())
			}
			r.stale = o.state.StaleState
			if o.state.Gcompose != nil && o.state.Gcompose.Identity != nil {
				r.merge(o.state.Gcompose.Identity)
			}
		}
		return o
	}
	// Identity reported by an action is kept whatever its exit, as the
	// engine does since identity is streamed as reported.
	_, id, err := protocol.ParseIdentityLines(stdout.Bytes())
	if err != nil {
		r.e.t.Fatalf("identity lines of %s: %v", r.name, err)
	}
	r.merge(id)
	if strings.Contains(o.stdout+o.stderr, appKey) {
		r.e.t.Fatalf("%s %v printed the app key", r.name, args)
	}
	return o
}

func (r *resource) merge(id map[string]any) {
	if len(id) == 0 {
		return
	}
	if r.persisted.Identity == nil {
		r.persisted.Identity = map[string]any{}
	}
	maps.Copy(r.persisted.Identity, id)
}

func (r *resource) action(ctx context.Context, name string) outcome {
	return r.call(ctx, protocol.Present, sdk.ActionArg, name)
}

func (r *resource) state(ctx context.Context) outcome {
	return r.call(ctx, protocol.Present, sdk.StateArg)
}

// mustAct runs an action that must succeed.
func (r *resource) mustAct(ctx context.Context, name string) outcome {
	r.e.t.Helper()
	o := r.action(ctx, name)
	if o.exit != 0 {
		r.e.t.Fatalf("%s %s: %s", r.name, name, o)
	}
	return o
}

func (r *resource) id(key string) string {
	s, _ := r.persisted.Identity[key].(string)
	return s
}

// serviceConfig is the config adapters/golem/lowering gives a service instance.
func serviceConfig(name, imageHash, allocation string, network *resource, nodeIP string, init ...[]string) map[string]any {
	cfg := map[string]any{
		"name": name, "instance": 0,
		"payload":       map[string]any{"name": name + "-payload", "runtime": "vm", "capabilities": []any{"vpn"}, "params": map[string]any{"image_hash": imageHash}},
		"allocation_id": allocation,
	}
	if network != nil {
		cfg["network"] = map[string]any{"name": network.name, "id": network.id("network_id")}
	}
	if nodeIP != "" {
		cfg["node_ip"] = nodeIP
	}
	var cmds []any
	for _, args := range init {
		a := make([]any, len(args))
		for i, s := range args {
			a[i] = s
		}
		cmds = append(cmds, map[string]any{"run": map[string]any{"args": a}})
	}
	if len(cmds) > 0 {
		cfg["init"] = cmds
	}
	return cfg
}

// allocation creates an allocation for the in-process services.
func (e *env) allocation(ctx context.Context) string {
	e.t.Helper()
	a, err := e.yc.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "50", PaymentPlatform: &yagna.PaymentPlatform{Name: "erc20-hoodi-tglm"}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = e.yc.ReleaseAllocation(context.Background(), a.AllocationID) })
	return a.AllocationID
}

// testLogger sends a component's logs to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}
