package adapter_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// TestActionAnswersState drives the SDK adapter image (which offers
// action_state) one-shot and served: an action asked for the state ends
// with the VALID answer its state call would give, in the same container or
// server call (no state container runs); not asked, or with the client's
// NoActionState, the action answers none and the caller asks as before. A
// plain Deployster adapter is never asked (TestDeploysterNames pins its
// requests byte for byte).
func TestActionAnswersState(t *testing.T) {
	// (No comma in a subtest's name: its TempDir is mounted, and Podman
	// cannot mount a path holding one, see runner.TestMountSourceWithAComma.)
	for _, mode := range []string{"one-shot", "served", "one-shot not asked", "served NoActionState"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, func(o *adapter.Options) {
				o.NoServe = strings.HasPrefix(mode, "one-shot")
				o.NoActionState = strings.HasSuffix(mode, "NoActionState")
			})
			defer closeClient(t, e.client)
			tag := testimage.Image(t, e.ctx, "./internal/testimage/testdata/sdkadapter", "gcompose/sdkadapter:test")
			dir := t.TempDir()
			tg := adapter.Target{App: e.app, Lineage: "lin-A", Name: "files.answer", Image: tag, Config: map[string]any{"content": "one"},
				Plugs: map[string]adapter.Plug{"data": {Path: dir}}}
			st, err := e.client.State(e.ctx, tg, protocol.Present, nil)
			if err != nil || st.Status != protocol.Stale {
				t.Fatalf("state: %+v %v", st, err)
			}
			act := tg
			if !strings.HasSuffix(mode, "not asked") {
				act.AnswerState = protocol.Present
			}
			act.Operation = &protocol.Operation{ID: "op-1", Kind: protocol.ChangeCreate, Action: st.Actions[0].Name, StartedAt: time.Now().UTC()}
			before := len(e.count.calls())
			out, err := e.client.Action(e.ctx, act, st.Actions[0], st.StaleState, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "files.answer")); string(got) != "one" {
				t.Fatalf("file %q", got)
			}
			if strings.Contains(out.Output, protocol.StatePrefix) {
				t.Errorf("the state line is in the output for people:\n%s", out.Output)
			}
			asked := act.AnswerState != "" && !strings.HasSuffix(mode, "NoActionState")
			if !asked {
				if out.State != nil {
					t.Fatalf("state %+v answered, though not asked", out.State)
				}
				return
			}
			if out.State == nil || out.State.Status != protocol.Valid || out.State.State["content"] != "one" {
				t.Fatalf("state answered %+v, want VALID with content one", out.State)
			}
			calls := e.count.calls()[before:]
			if o := strings.HasPrefix(mode, "one-shot"); (o && len(calls) != 1) || (!o && len(calls) != 0) {
				t.Errorf("containers for the action: %v; want the action's alone (one-shot) or none (served)", calls)
			}
		})
	}
}

// fakeRunner answers init with an adapter offering action_state and every
// action with stdout: a fast test of what the client makes of an action's
// state line (the containers are tested above).
type fakeRunner struct{ stdout string }

func (f fakeRunner) ImageID(context.Context, string) (string, error) { return "sha256:fake", nil }

func (f fakeRunner) Run(_ context.Context, s runner.Spec) (*runner.Result, error) {
	if s.Call == protocol.CallInit {
		return &runner.Result{Stdout: []byte(`{"state_action":{"args":["state"]},"gcompose":{"protocol":1,"action_state":true}}`)}, nil
	}
	return &runner.Result{Stdout: []byte(f.stdout)}, nil
}

func TestActionStateLine(t *testing.T) {
	valid := `{"status":"VALID","state":{"a":1}}`
	tests := []struct {
		name   string
		stdout string
		state  string // the answer's state as JSON, "" for none
		err    string
	}{
		{"answered", "done\n" + protocol.StatePrefix + valid + "\n", `{"a":1}`, ""},
		{"none", "done\n", "", ""},
		{"stale is an answer too", protocol.StatePrefix + `{"status":"STALE","actions":[{"name":"x"}]}` + "\n", `null`, ""},
		{"breaks the schema", protocol.StatePrefix + `{"status":"VALID"}` + "\n", "", `files.x: action create call: state line: state answer does not match its schema: (root): missing property "state"`},
		{"not JSON", protocol.StatePrefix + "{oops\n", "", "stdout line 1: state: want a JSON object"},
		{"two lines", protocol.StatePrefix + valid + "\n" + protocol.StatePrefix + valid + "\n", "", "a second state line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := adapter.New(adapter.Options{Runner: fakeRunner{stdout: tt.stdout}})
			if err != nil {
				t.Fatal(err)
			}
			tg := adapter.Target{App: "a", Name: "files.x", Image: "fake", Config: map[string]any{}, AnswerState: protocol.Present}
			out, err := c.Action(context.Background(), tg, protocol.ActionSpec{Name: "create"}, nil, nil)
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			got := ""
			if out != nil && out.State != nil {
				raw, _ := json.Marshal(out.State.State)
				got = string(raw)
			}
			if got != tt.state {
				t.Errorf("state %s, want %s", got, tt.state)
			}
			if out != nil && strings.Contains(out.Output, "gcompose:") {
				t.Errorf("output %q holds a protocol line", out.Output)
			}
		})
	}
}
