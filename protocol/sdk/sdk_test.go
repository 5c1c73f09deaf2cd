package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

var update = flag.Bool("update", false, "rewrite golden files")

// example is a small adapter: its resource is VALID when config.want equals
// "have", STALE with a create action otherwise; absent means delete.
func example() sdk.Adapter {
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			ConfigSchema: json.RawMessage(`{"type":"object"}`),
			Gcompose:     &protocol.InitExt{Network: "bridge"},
		}),
		State: func(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
			var cfg struct {
				Want string `json:"want"`
			}
			if err := req.DecodeConfig(&cfg); err != nil {
				return nil, err
			}
			say := req.Printf // printing in a state call must not break the answer
			say("thinking about %s", req.Name)
			if req.Desired() == protocol.Absent {
				return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: "delete"}},
					Gcompose: &protocol.StateExt{Change: protocol.ChangeDelete}}, nil
			}
			if cfg.Want == "have" {
				return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"have": cfg.Want}}, nil
			}
			ss, err := sdk.StaleState(map[string]any{"have": "old", "id": req.Persisted().Identity["id"]})
			if err != nil {
				return nil, err
			}
			return &protocol.StateResult{Status: protocol.Stale, StaleState: ss,
				Actions:  []protocol.ActionSpec{{Name: "create", Description: "create it"}, {Name: "custom", Image: "other:1"}},
				Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate, Reason: "missing"}}, nil
		},
		Actions: map[string]sdk.ActionFunc{
			"create": func(ctx context.Context, req *sdk.Request) error {
				var ss struct {
					Have string `json:"have"`
				}
				if err := req.DecodeStaleState(&ss); err != nil {
					return err
				}
				req.Log.Debug("creating", "was", ss.Have)
				if key, ok := req.Env("APPKEY"); ok {
					req.Printf("using key of %d bytes", len(key))
				}
				req.Printf("created (was %s)", ss.Have)
				return req.ReportIdentity(map[string]any{"id": "i-2"})
			},
			"delete": func(ctx context.Context, req *sdk.Request) error { return errors.New("cannot delete") },
			"panic":  func(ctx context.Context, req *sdk.Request) error { panic("boom") },
		},
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		adapter    func() sdk.Adapter
		args       []string
		stdin      string // file in testdata, or "" for empty stdin
		wantCode   int
		golden     bool   // compare stdout with testdata/<name>.golden
		wantStderr string // substring
	}{
		{"init", example, nil, "init.json", 0, true, ""},
		{"init no stdin", example, nil, "", 0, true, ""},
		{"state stale", example, []string{"state"}, "state-present.json", 0, true, "thinking about r1"},
		{"state valid deployster", example, []string{"state"}, "state-deployster.json", 0, true, ""},
		{"state absent", example, []string{"state"}, "state-absent.json", 0, true, ""},
		{"action", example, []string{"action", "create"}, "action.json", 0, true, "creating"},
		{"action fails", example, []string{"action", "delete"}, "action.json", 1, false, "error: action delete: cannot delete"},
		{"action panics", example, []string{"action", "panic"}, "action.json", 1, false, "panicked: boom"},
		{"unknown action", example, []string{"action", "nope"}, "action.json", 1, false, `unknown action "nope"`},
		{"bad args", example, []string{"frobnicate"}, "action.json", 2, false, "unknown invocation"},
		{"bad stdin", example, []string{"state"}, "../sdk.go", 1, false, "not valid JSON"},
		{"state names undefined action", func() sdk.Adapter {
			a := example()
			delete(a.Actions, "create")
			return a
		}, []string{"state"}, "state-present.json", 1, false, `names action "create", which the adapter does not define`},
		{"state answer breaks schema", func() sdk.Adapter {
			a := example()
			a.State = func(context.Context, *sdk.Request) (*protocol.StateResult, error) {
				return &protocol.StateResult{Status: protocol.Valid, Gcompose: &protocol.StateExt{Forces: []string{"no-slash"}}}, nil
			}
			return a
		}, []string{"state"}, "state-present.json", 1, false, "breaks the protocol: state answer does not match its schema: /gcompose/forces/0"},
		{"no serve", func() sdk.Adapter {
			a := example()
			a.NoServe = true
			return a
		}, nil, "init.json", 0, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin []byte
			if tt.stdin != "" {
				var err error
				if stdin, err = os.ReadFile(filepath.Join("testdata", tt.stdin)); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr bytes.Buffer
			code := sdk.Run(t.Context(), tt.adapter(), tt.args, bytes.NewReader(stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
			if tt.wantCode != 0 && stdout.Len() != 0 {
				t.Errorf("failed call wrote stdout: %q", stdout.String())
			}
			if tt.golden {
				golden(t, filepath.Join("testdata", strings.ReplaceAll(tt.name, " ", "-")+".golden"), stdout.String())
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("stdout differs from %s:\n got: %s\nwant: %s", path, got, want)
	}
}

// TestAnswersMatchSchemas checks that what the SDK writes passes the
// validator gcompose uses.
func TestAnswersMatchSchemas(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		stdin string
		check func([]byte) error
	}{
		{nil, "init.json", v.ValidateInitResult},
		{[]string{"state"}, "state-present.json", v.ValidateStateResult},
		{[]string{"state"}, "state-deployster.json", v.ValidateStateResult},
	} {
		stdin, err := os.ReadFile(filepath.Join("testdata", c.stdin))
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		if code := sdk.Run(t.Context(), example(), c.args, bytes.NewReader(stdin), &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut.String())
		}
		if err := c.check(out.Bytes()); err != nil {
			t.Errorf("%v: %v", c.args, err)
		}
	}
}
