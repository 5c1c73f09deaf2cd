package misbehave_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/misbehave"
	"github.com/gcompose/gcompose/protocol"
)

func serveLines(t *testing.T, calls ...protocol.ServeRequest) *bytes.Buffer {
	t.Helper()
	var in bytes.Buffer
	for i, c := range calls {
		c.ID = uint64(i + 1)
		c.Request = protocol.Request{Name: "m", Type: misbehave.Image, Version: "t", Workspace: "/w", Config: c.Request.Config}
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(append(raw, '\n'))
	}
	return &in
}

func cfg(kv ...string) protocol.Request {
	c := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i]] = kv[i+1]
	}
	return protocol.Request{Config: c}
}

func serveEnv(k string) string {
	if k == misbehave.EnvInit {
		return misbehave.InitServe
	}
	return ""
}

func TestServe(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		calls    []protocol.ServeRequest
		timeout  time.Duration
		wantCode int
		// want maps an id to what its response holds ("" = no response);
		// "raw" lists lines that must appear unframed.
		want map[uint64]string
		raw  string
	}{
		{
			name: "well-behaved and framed misbehaviour",
			calls: []protocol.ServeRequest{
				{Call: "init"},
				{Call: "state", Request: cfg()},
				{Call: "state", Request: cfg("mode", "wrong-schema")},
				{Call: "state", Request: cfg("mode", "lying")},
				{Call: "action", Action: "misbehave", Request: cfg("mode", "slow", "on", "action")},
				{Call: "state", Request: cfg("colour", "red")},
			},
			want: map[uint64]string{1: `"serve":true`, 2: `"status":"VALID"`, 3: `"colour":"red"`, 4: `"status":"STALE"`,
				5: `misbehave_done`, 6: "unknown field"},
		},
		{
			name:  "garbage breaks the framing",
			calls: []protocol.ServeRequest{{Call: "state", Request: cfg("mode", "garbage")}, {Call: "state", Request: cfg()}},
			want:  map[uint64]string{1: "", 2: `"status":"VALID"`},
			raw:   "this is not JSON {",
		},
		{
			name: "exit-nonzero kills the server with a hung call in flight",
			calls: []protocol.ServeRequest{{Call: "state", Request: cfg("mode", "hang")},
				{Call: "state", Request: cfg("mode", "exit-nonzero")}},
			wantCode: misbehave.ExitCode,
			want:     map[uint64]string{1: "", 2: ""},
		},
		{
			name:     "a hung call keeps the server up after stdin closes",
			calls:    []protocol.ServeRequest{{Call: "state", Request: cfg("mode", "hang")}},
			timeout:  100 * time.Millisecond,
			wantCode: 1,
			want:     map[uint64]string{1: ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			var out, errOut bytes.Buffer
			code := misbehave.Run(ctx, []string{"serve"}, serveEnv, serveLines(t, tt.calls...), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.wantCode, errOut.String())
			}
			got := map[uint64]string{}
			var raw []string
			sc := bufio.NewScanner(&out)
			for sc.Scan() {
				var r protocol.ServeResponse
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					raw = append(raw, sc.Text())
					continue
				}
				if err := v.ValidateMessage(protocol.MsgServeResponse, sc.Bytes()); err != nil {
					t.Errorf("response %s: %v", sc.Text(), err)
				}
				got[r.ID] = sc.Text()
			}
			for id, w := range tt.want {
				if w == "" {
					if g, ok := got[id]; ok {
						t.Errorf("id %d answered %s, want no answer", id, g)
					}
					continue
				}
				if !strings.Contains(got[id], w) {
					t.Errorf("id %d: %q, want it to contain %q", id, got[id], w)
				}
			}
			if tt.raw != "" && !strings.Contains(strings.Join(raw, "\n"), tt.raw) {
				t.Errorf("unframed output %q lacks %q", raw, tt.raw)
			}
		})
	}
}
