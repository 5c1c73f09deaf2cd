package service_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Asked what renting anew will leave (protocol RequestExt.Replace: deploy
// --replace), the service plans the address its node is planned at on its
// VPN, and asks yagna nothing: the create after the removal is told nothing
// of what runs now either.
func TestReplacePlansTheNodeAddress(t *testing.T) {
	var asked atomic.Int64
	yagna := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "not for a replace question", http.StatusInternalServerError)
	}))
	defer yagna.Close()
	payload := map[string]any{"runtime": "vm", "params": map[string]any{"image_hash": "c37c1364f637c199fe710ca62241ff486db92c875b786814c6030aa1"}}
	running := &protocol.Persisted{Identity: map[string]any{"agreement_id": "a-1", "activity_id": "act-1", "provider_id": "p-1", "ip": "192.168.77.2"}}
	for _, tc := range []struct {
		name      string
		config    map[string]any
		persisted *protocol.Persisted
		planned   map[string]any
	}{
		{"on a VPN at a planned address", map[string]any{"name": "db", "instance": 0, "payload": payload,
			"network": map[string]any{"name": "net", "id": "n-1"}, "node_ip": "192.168.77.2"}, nil,
			map[string]any{"/network_node/ip": "192.168.77.2"}},
		{"the descriptor's ip list", map[string]any{"name": "db", "instance": 1, "payload": payload,
			"network": map[string]any{"name": "net", "id": "n-1"}, "ip": []any{"192.168.77.2", "192.168.77.3"}}, running,
			map[string]any{"/network_node/ip": "192.168.77.3"}},
		{"no VPN", map[string]any{"name": "db", "instance": 0, "payload": payload}, running, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := protocol.Request{Name: "db", Type: "gcompose/golem-service:dev", Version: "test", Workspace: "/w", Config: tc.config,
				Gcompose: &protocol.RequestExt{Protocol: protocol.Version, App: "app", Call: protocol.CallState, Desired: protocol.Present,
					Persisted: tc.persisted, Replace: true, Env: map[string]string{"YAGNA_API_URL": yagna.URL, "YAGNA_APPKEY": "k"}}}
			raw, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := sdk.Run(t.Context(), service.Adapter(), []string{sdk.StateArg}, bytes.NewReader(raw), &out, &errb); code != 0 {
				t.Fatalf("state exited %d: %s", code, errb.String())
			}
			var ans protocol.StateResult
			if err := json.Unmarshal(out.Bytes(), &ans); err != nil {
				t.Fatalf("answer %q: %v", out.String(), err)
			}
			if ans.Status != protocol.Stale || ans.Gcompose == nil || ans.Gcompose.Change != protocol.ChangeCreate {
				t.Fatalf("answer %s: want STALE create", out.String())
			}
			if got := ans.Gcompose.Planned; len(got) != len(tc.planned) || (tc.planned != nil && got["/network_node/ip"] != tc.planned["/network_node/ip"]) {
				t.Errorf("planned %v, want %v", got, tc.planned)
			}
			if ipUnknown := slices.Contains(ans.Gcompose.Unknown, "/network_node/ip"); ipUnknown != (tc.planned == nil) {
				t.Errorf("unknown %v: the address is planned %v", ans.Gcompose.Unknown, tc.planned != nil)
			}
			if n := asked.Load(); n != 0 {
				t.Fatalf("yagna was asked %d time(s)", n)
			}
		})
	}
}
