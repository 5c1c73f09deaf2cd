package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

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
				golden.CheckString(t, filepath.Join("testdata", strings.ReplaceAll(tt.name, " ", "-")+".golden"), stdout.String())
			}
		})
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

// sweeping is example with a sweep over a fixed set of remote objects: i-1
// is known by identity, i-2 tagged with a known pending operation, i-3 an
// orphan of this lineage, i-4 another lineage's.
func sweeping() sdk.Adapter {
	a := example()
	a.Actions["tagged"] = func(ctx context.Context, req *sdk.Request) error {
		op := req.Operation()
		req.Printf("op %s (%s %s) lineage %s pending %s", op.ID, op.Kind, op.Action, req.Lineage(), req.Persisted().Pending.ID)
		return nil
	}
	a.Sweep = func(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
		sr := req.SweepRequest()
		known, pending := map[string]bool{}, map[string]bool{}
		for _, k := range sr.Known {
			if id, ok := k.Identity["id"].(string); ok {
				known[id] = true
			}
			if k.Pending != nil {
				pending[k.Pending.ID] = true
			}
		}
		res := &protocol.SweepResult{}
		for _, o := range []struct{ id, lineage, op string }{{"i-1", "lin-1", "op-1"}, {"i-2", "lin-1", "op-7"}, {"i-3", "lin-1", "op-3"}, {"i-4", "lin-0", "op-4"}} {
			if known[o.id] || pending[o.op] {
				continue
			}
			action := protocol.OrphanReported
			if o.lineage == req.Lineage() && sr.Terminate {
				action = protocol.OrphanTerminated
			}
			res.Found = append(res.Found, protocol.Orphan{Kind: "thing", ID: o.id, Lineage: o.lineage, Action: action,
				Detail: "created by operation " + o.op + " of app " + req.App()})
		}
		return res, nil
	}
	return a
}

func TestSweep(t *testing.T) {
	tests := []struct {
		name     string
		adapter  func() sdk.Adapter
		args     []string
		stdin    string
		wantCode int
		want     string // stdout (exact) or stderr (substring) when failing
	}{
		{"init offers sweep", sweeping, nil, "init.json", 0, `"sweep":true`},
		{"sweep", sweeping, []string{"sweep"}, "sweep.json", 0,
			`{"found":[{"kind":"thing","id":"i-3","lineage":"lin-1","action":"terminated","detail":"created by operation op-3 of app shop"},{"kind":"thing","id":"i-4","lineage":"lin-0","action":"reported","detail":"created by operation op-4 of app shop"}]}` + "\n"},
		{"action sees its operation", sweeping, []string{"action", "tagged"}, "action-op.json", 0, "op op-9 (create tagged) lineage lin-1 pending op-7\n"},
		{"no sweep offered", example, []string{"sweep"}, "sweep.json", 1, "the adapter does not offer sweep"},
		{"sweep without question", sweeping, []string{"sweep"}, "action.json", 1, "no sweep question"},
		{"sweep answer breaks schema", func() sdk.Adapter {
			a := sweeping()
			a.Sweep = func(context.Context, *sdk.Request) (*protocol.SweepResult, error) {
				return &protocol.SweepResult{Found: []protocol.Orphan{{Kind: "thing", ID: "x", Action: "killed"}}}, nil
			}
			return a
		}, []string{"sweep"}, "sweep.json", 1, "breaks the protocol: sweep answer does not match its schema: /found/0/action"},
		{"nothing found", func() sdk.Adapter {
			a := sweeping()
			a.Sweep = func(context.Context, *sdk.Request) (*protocol.SweepResult, error) { return nil, nil }
			return a
		}, []string{"sweep"}, "sweep.json", 0, `{"found":[]}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin, err := os.ReadFile(filepath.Join("testdata", tt.stdin))
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code := sdk.Run(t.Context(), tt.adapter(), tt.args, bytes.NewReader(stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr.String())
			}
			switch {
			case code != 0 && !strings.Contains(stderr.String(), tt.want):
				t.Errorf("stderr lacks %q:\n%s", tt.want, stderr.String())
			case code == 0 && tt.args == nil && !strings.Contains(stdout.String(), tt.want):
				t.Errorf("init answer lacks %q: %s", tt.want, stdout.String())
			case code == 0 && tt.args != nil && stdout.String() != tt.want:
				t.Errorf("stdout\n got %q\nwant %q", stdout.String(), tt.want)
			}
		})
	}
}

// Check: offered in the init answer when set; its verdict is the answer (a
// problem is not a failed call), one-shot and served alike.
func TestCheck(t *testing.T) {
	a := example()
	a.Check = func(ctx context.Context, req *sdk.Request) error {
		if key, _ := req.Env("API_KEY"); key != "good" {
			return errors.New("api.example refused the key (401)\n")
		}
		return nil
	}
	var out, errb bytes.Buffer
	if code := sdk.Run(t.Context(), a, nil, strings.NewReader(`{}`), &out, &errb); code != 0 || !strings.Contains(out.String(), `"check":true`) {
		t.Fatalf("init: exit %d %s %s", code, out.String(), errb.String())
	}
	for key, want := range map[string]string{"good": `{"ok":true}`, "bad": `{"ok":false,"problem":"api.example refused the key (401)"}`} {
		in := `{"name":"","type":"t","version":"1","verbose":false,"workspace":"/w","gcompose":{"protocol":1,"call":"check","env":{"API_KEY":"` + key + `"}}}`
		out.Reset()
		errb.Reset()
		if code := sdk.Run(t.Context(), a, []string{sdk.CheckArg}, strings.NewReader(in), &out, &errb); code != 0 {
			t.Fatalf("check %s: exit %d: %s", key, code, errb.String())
		}
		if got := strings.TrimSpace(out.String()); got != want {
			t.Errorf("check %s: %s, want %s", key, got, want)
		}
		// Served: the same answer as the result of a "check" call.
		line := `{"id":7,"call":"check","args":["check"],"request":` + in + "}\n"
		out.Reset()
		if code := sdk.Run(t.Context(), a, []string{sdk.ServeArg}, strings.NewReader(line), &out, &errb); code != 0 {
			t.Fatalf("serve: exit %d: %s", code, errb.String())
		}
		var resp protocol.ServeResponse
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil || resp.Error != "" || string(resp.Result) != want {
			t.Errorf("served check %s: %s (%v), want result %s", key, out.String(), err, want)
		}
	}
	// Without Check, init does not offer it.
	out.Reset()
	sdk.Run(t.Context(), example(), nil, strings.NewReader(`{}`), &out, &errb)
	if strings.Contains(out.String(), `"check"`) {
		t.Errorf("init offers check without a Check: %s", out.String())
	}
}
