package misbehave_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/misbehave"
	"github.com/gcompose/gcompose/protocol"
)

// countingWriter counts what huge-output writes without keeping it.
type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

// cappedWriter refuses writes past a cap, like gcompose's stdout limit.
type cappedWriter struct{ left int }

func (c *cappedWriter) Write(p []byte) (int, error) {
	if len(p) > c.left {
		return 0, errors.New("stdout cap reached")
	}
	c.left -= len(p)
	return len(p), nil
}

func TestRun(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		code   int
		stdout string // "init", "VALID", "STALE", "not-json", "wrong-shape", "empty", "huge", or a substring of free text
		stderr string
	}
	tests := []struct {
		name     string
		args     []string
		initEnv  string
		config   map[string]any
		desired  string
		identity map[string]any
		plain    bool // no gcompose member in the request
		timeout  time.Duration
		want     want
	}{
		{name: "init ok", want: want{0, "init", ""}},
		{name: "init hang", initEnv: "hang", timeout: 50 * time.Millisecond, want: want{1, "empty", "hanging"}},
		{name: "init garbage", initEnv: "garbage", want: want{0, "not-json", ""}},
		{name: "init wrong-schema", initEnv: "wrong-schema", want: want{0, "wrong-shape", ""}},
		{name: "init exit-nonzero", initEnv: "exit-nonzero", want: want{3, "empty", "misbehaving on purpose"}},
		{name: "init huge-output", initEnv: "huge-output", want: want{0, "huge", ""}},
		{name: "init slow", initEnv: "slow", want: want{0, "init", ""}},
		{name: "init wrong-protocol", initEnv: "wrong-protocol", want: want{0, "init", ""}},
		{name: "init deployster", initEnv: "deployster", want: want{0, "init", ""}},
		{name: "init unknown", initEnv: "frobnicate", want: want{1, "empty", "unknown"}},

		{name: "state ok", args: []string{"state"}, want: want{0, "VALID", ""}},
		{name: "state hang", args: []string{"state"}, config: map[string]any{"mode": "hang"}, timeout: 50 * time.Millisecond, want: want{1, "empty", "hanging"}},
		{name: "state garbage", args: []string{"state"}, config: map[string]any{"mode": "garbage"}, want: want{0, "not-json", ""}},
		{name: "state wrong-schema", args: []string{"state"}, config: map[string]any{"mode": "wrong-schema"}, want: want{0, "wrong-shape", ""}},
		{name: "state exit-nonzero", args: []string{"state"}, config: map[string]any{"mode": "exit-nonzero", "message": "boom"}, want: want{3, "empty", "boom"}},
		{name: "state huge-output", args: []string{"state"}, config: map[string]any{"mode": "huge-output"}, want: want{0, "huge", ""}},
		{name: "state lying", args: []string{"state"}, config: map[string]any{"mode": "lying"}, want: want{0, "STALE", ""}},
		{name: "state slow", args: []string{"state"}, config: map[string]any{"mode": "slow", "sleep_ms": 20}, want: want{0, "VALID", ""}},
		{name: "state slow, interrupted", args: []string{"state"}, config: map[string]any{"mode": "slow", "sleep_ms": 5000}, timeout: 20 * time.Millisecond, want: want{1, "empty", "interrupted"}},
		{name: "state: only on destroy, deploying", args: []string{"state"}, config: map[string]any{"mode": "garbage", "when": "destroy"}, want: want{0, "VALID", ""}},
		{name: "state: only on destroy, destroying", args: []string{"state"}, config: map[string]any{"mode": "garbage", "when": "destroy"}, desired: "absent", want: want{0, "not-json", ""}},
		{name: "state: on action asks for the action", args: []string{"state"}, config: map[string]any{"mode": "hang", "on": "action"}, want: want{0, "STALE", ""}},
		{name: "state: on action, done", args: []string{"state"}, config: map[string]any{"mode": "slow", "on": "action"}, identity: map[string]any{"misbehave_done": true}, want: want{0, "VALID", ""}},
		{name: "state bad config", args: []string{"state"}, config: map[string]any{"colour": "red"}, want: want{1, "empty", "unknown field"}},
		{name: "state deployster gets extension", args: []string{"state"}, initEnv: "deployster", want: want{1, "empty", "gcompose member"}},
		{name: "state deployster plain", args: []string{"state"}, initEnv: "deployster", plain: true, want: want{0, "VALID", ""}},

		{name: "action hang", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "hang", "on": "action"}, timeout: 50 * time.Millisecond, want: want{1, "empty", "hanging"}},
		{name: "action exit-nonzero", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "exit-nonzero", "on": "action"}, want: want{3, "empty", "misbehaving"}},
		{name: "action huge-output", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "huge-output", "on": "action", "bytes": 3 << 20}, want: want{0, "huge", ""}},
		{name: "action garbage is free text", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "garbage", "on": "action"}, want: want{0, "this is not JSON", ""}},
		{name: "action slow reports done", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "slow", "on": "action", "sleep_ms": 10}, want: want{0, `gcompose:identity {"misbehave_done":true}`, ""}},
		{name: "action wrong-schema identity", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "wrong-schema", "on": "action"}, want: want{0, `gcompose:identity ["not"`, ""}},
		{name: "action bad-identity", args: []string{"action", "misbehave"}, config: map[string]any{"mode": "bad-identity", "on": "action"}, want: want{0, "gcompose:identity {not json", ""}},
		{name: "action noop", args: []string{"action", "noop"}, config: map[string]any{"mode": "lying"}, want: want{0, "did nothing", ""}},
		{name: "action unknown", args: []string{"action", "x"}, want: want{1, "empty", "unknown action"}},
		{name: "bad args", args: []string{"x", "y", "z"}, want: want{1, "empty", "unknown invocation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := protocol.Request{Name: "m", Type: misbehave.Image, Version: "t", Workspace: "/w", Config: tt.config}
			if len(tt.args) > 0 && !tt.plain {
				req.Gcompose = &protocol.RequestExt{Protocol: protocol.Version, Call: "state", Desired: tt.desired,
					Persisted: &protocol.Persisted{Identity: tt.identity}}
			}
			raw, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			env := func(k string) string {
				if k == misbehave.EnvInit {
					return tt.initEnv
				}
				if k == misbehave.EnvSleepMS {
					return "10"
				}
				return ""
			}
			var out bytes.Buffer
			var stdout io.Writer = &out
			counter := &countingWriter{}
			if tt.want.stdout == "huge" {
				stdout = counter
			}
			var stderr bytes.Buffer
			code := misbehave.Run(ctx, tt.args, env, bytes.NewReader(raw), stdout, &stderr)
			if code != tt.want.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.want.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want.stderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.want.stderr)
			}
			got := out.Bytes()
			switch tt.want.stdout {
			case "empty":
				if len(got) != 0 {
					t.Errorf("stdout %q, want none", got)
				}
			case "huge":
				wantN := misbehave.DefaultHugeBytes
				if b, ok := tt.config["bytes"].(int); ok {
					wantN = b
				}
				if counter.n != wantN {
					t.Errorf("wrote %d bytes, want %d", counter.n, wantN)
				}
			case "not-json":
				if json.Valid(bytes.TrimSpace(got)) {
					t.Errorf("stdout %q is JSON", got)
				}
			case "wrong-shape":
				if !json.Valid(bytes.TrimSpace(got)) {
					t.Fatalf("stdout %q is not JSON", got)
				}
				check := v.ValidateStateResult
				if len(tt.args) == 0 {
					check = v.ValidateInitResult
				}
				if err := check(got); err == nil {
					t.Errorf("stdout %s passes the schema", got)
				}
			case "init":
				if err := v.ValidateInitResult(got); err != nil {
					t.Error(err)
				}
				var ir protocol.InitResult
				_ = json.Unmarshal(got, &ir)
				switch tt.initEnv {
				case "deployster":
					if ir.Gcompose != nil {
						t.Error("deployster init answered with a gcompose member")
					}
				case "wrong-protocol":
					if ir.Gcompose == nil || protocol.CheckVersion(ir.Gcompose.Protocol) == nil {
						t.Errorf("wrong-protocol init answered a version gcompose accepts: %s", got)
					}
				}
			case "VALID", "STALE":
				if err := v.ValidateStateResult(got); err != nil {
					t.Fatal(err)
				}
				var sr protocol.StateResult
				_ = json.Unmarshal(got, &sr)
				if sr.Status != tt.want.stdout {
					t.Errorf("status %s, want %s", sr.Status, tt.want.stdout)
				}
			default:
				if !strings.Contains(string(got), tt.want.stdout) {
					t.Errorf("stdout %q lacks %q", got, tt.want.stdout)
				}
			}
		})
	}
}

func TestHugeOutputStopsWhenRefused(t *testing.T) {
	var stderr bytes.Buffer
	code := misbehave.Run(t.Context(), []string{"state"}, func(string) string { return "" },
		strings.NewReader(`{"config":{"mode":"huge-output"}}`), &cappedWriter{left: 1 << 20}, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "stdout cap reached") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestInitVariantDockerfile(t *testing.T) {
	got := misbehave.InitVariantDockerfile(misbehave.Image, "hang")
	want := "FROM gcompose/misbehave-adapter:dev\nENV GCOMPOSE_MISBEHAVE_INIT=hang\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
