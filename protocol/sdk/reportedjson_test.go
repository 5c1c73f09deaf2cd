package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// TestAnswerStateSeesReportedIdentityAsJSON: the state an action answers at
// its end reads the identity it reported as gcompose would hand it back,
// decoded from JSON (numbers float64, objects map[string]any), not as the
// Go values the action passed. golem-proxy reports its ports as a
// map[string]int and reads them back as JSON: given the Go map, its state
// saw no ports and answered STALE, and every deploy failed the proxy as a
// broken adapter.
func TestAnswerStateSeesReportedIdentityAsJSON(t *testing.T) {
	a := sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{}),
		State: func(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
			ports, _ := req.Persisted().Identity["ports"].(map[string]any)
			if port, ok := ports["http:80"].(float64); !ok || port != 41000 {
				return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "create"}}, Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate, Reason: "no port"}}, nil
			}
			return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{}}, nil
		},
		Actions: map[string]sdk.ActionFunc{"create": func(ctx context.Context, req *sdk.Request) error {
			return req.ReportIdentity(map[string]any{"ports": map[string]int{"http:80": 41000}})
		}},
	}
	raw, _ := json.Marshal(actionRequest("create", true, protocol.Present))
	var o, e bytes.Buffer
	if code := sdk.Run(t.Context(), a, []string{"action", "create"}, bytes.NewReader(raw), &o, &e); code != 0 {
		t.Fatalf("exit %d: %s", code, e.String())
	}
	out, err := protocol.ParseActionOutput(o.Bytes())
	if err != nil || out.State == nil {
		t.Fatalf("no state line (%v):\n%s\n%s", err, o.String(), e.String())
	}
	var sr protocol.StateResult
	if err := json.Unmarshal(out.State, &sr); err != nil {
		t.Fatal(err)
	}
	if sr.Status != protocol.Valid {
		t.Errorf("the action's state is %s, want VALID: %s", sr.Status, out.State)
	}
}
