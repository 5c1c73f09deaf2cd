package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// verifying is an adapter whose State answers VALID with what it was asked
// with: the pending operation and the identity it found in persisted, the
// desired presence, and the call. Its create action reports an identity.
func verifying() sdk.Adapter {
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{}),
		State: func(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
			req.Printf("state asked")
			p := req.Persisted()
			st := map[string]any{"call": req.Gcompose.Call, "desired": req.Desired(), "identity": p.Identity}
			if p.Pending != nil {
				st["pending"] = p.Pending.ID
			}
			return &protocol.StateResult{Status: protocol.Valid, State: st}, nil
		},
		Actions: map[string]sdk.ActionFunc{
			"create": func(ctx context.Context, req *sdk.Request) error {
				req.Printf("created")
				return req.ReportIdentity(map[string]any{"id": "i-9"})
			},
			"fail": func(ctx context.Context, req *sdk.Request) error { return errors.New("broken") },
		},
	}
}

// actionRequest is an action request to an adapter that offers
// action_state; answer sets answer_state.
func actionRequest(action string, answer bool, desired string) protocol.Request {
	return protocol.Request{Name: "r1", Type: "t", Version: "1", Workspace: "/w", Config: map[string]any{}, StaleState: json.RawMessage(`{}`),
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, Call: protocol.CallAction, Action: action, AnswerState: answer, Desired: desired,
			Operation: &protocol.Operation{ID: "op-7", Kind: protocol.ChangeCreate, Action: action},
			Persisted: &protocol.Persisted{Identity: map[string]any{"old": "x"}}}}
}

// TestActionAnswersState: asked with answer_state, a successful action ends
// with exactly one state line holding what State answers to the request
// gcompose's verifying call would send (call state, the action's operation
// pending, the identity it reported merged in, desired as asked), one-shot
// and served alike; not asked, or opted out, or failed, it prints none.
func TestActionAnswersState(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	wantState := map[string]any{"call": "state", "desired": "absent", "pending": "op-7", "identity": map[string]any{"old": "x", "id": "i-9"}}
	tests := []struct {
		name      string
		adapter   func() sdk.Adapter
		action    string
		answer    bool
		wantState bool
		wantCode  int
		stderr    string
	}{
		{"asked", verifying, "create", true, true, 0, "state asked"},
		{"not asked", verifying, "create", false, false, 0, ""},
		{"opted out", func() sdk.Adapter { a := verifying(); a.NoActionState = true; return a }, "create", true, false, 0, ""},
		{"action fails", verifying, "fail", true, false, 1, "broken"},
		{"state fails", func() sdk.Adapter {
			a := verifying()
			a.State = func(context.Context, *sdk.Request) (*protocol.StateResult, error) { return nil, errors.New("no api") }
			return a
		}, "create", true, false, 0, "left to gcompose's state call"},
		{"state breaks the schema", func() sdk.Adapter {
			a := verifying()
			a.State = func(context.Context, *sdk.Request) (*protocol.StateResult, error) {
				return &protocol.StateResult{Status: protocol.Valid, Gcompose: &protocol.StateExt{Forces: []string{"x"}}}, nil
			}
			return a
		}, "create", true, false, 0, "/gcompose/forces/0"},
	}
	for _, tt := range tests {
		for _, served := range []bool{false, true} {
			name := tt.name + "/one-shot"
			if served {
				name = tt.name + "/served"
			}
			t.Run(name, func(t *testing.T) {
				req := actionRequest(tt.action, tt.answer, protocol.Absent)
				var stdout, stderr string
				code := 0
				if served {
					stdout, stderr, code = serveOne(t, v, tt.adapter(), protocol.ServeRequest{ID: 1, Call: protocol.CallAction, Action: tt.action, Request: req})
				} else {
					raw, _ := json.Marshal(req)
					var o, e bytes.Buffer
					code = sdk.Run(t.Context(), tt.adapter(), []string{"action", tt.action}, bytes.NewReader(raw), &o, &e)
					stdout, stderr = o.String(), e.String()
				}
				if code != tt.wantCode {
					t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
				}
				if !strings.Contains(stderr, tt.stderr) {
					t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr)
				}
				out, err := protocol.ParseActionOutput([]byte(stdout))
				if err != nil {
					t.Fatalf("stdout: %v\n%s", err, stdout)
				}
				if (out.State != nil) != tt.wantState {
					t.Fatalf("state line: %s, want one: %t\n%s", out.State, tt.wantState, stdout)
				}
				if strings.Contains(out.Text, "state asked") {
					t.Errorf("what State printed went to stdout:\n%s", stdout)
				}
				if out.State == nil {
					return
				}
				if err := v.ValidateStateResult(out.State); err != nil {
					t.Fatal(err)
				}
				var sr protocol.StateResult
				if err := json.Unmarshal(out.State, &sr); err != nil {
					t.Fatal(err)
				}
				got, _ := json.Marshal(sr.State)
				want, _ := json.Marshal(wantState)
				if sr.Status != protocol.Valid || string(got) != string(want) {
					t.Errorf("state answered %s %s, want VALID %s", sr.Status, got, want)
				}
			})
		}
	}
}

// serveOne sends one request to a served adapter and returns its
// response's stdout (or error), the server's stderr and 1 if the call failed.
func serveOne(t *testing.T, v *protocol.Validator, a sdk.Adapter, sr protocol.ServeRequest) (stdout, stderr string, code int) {
	t.Helper()
	raw, err := json.Marshal(sr)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer // written under the server's log lock, read once it exited
	done := make(chan int, 1)
	go func() {
		done <- sdk.Run(t.Context(), a, []string{"serve"}, inR, outW, &errb)
		outW.Close()
	}()
	if _, err := inW.Write(append(raw, '\n')); err != nil {
		t.Fatal(err)
	}
	// The response must be in before stdin closes (that cancels calls).
	sc := bufio.NewScanner(outR)
	var resp protocol.ServeResponse
	for sc.Scan() {
		if err := v.ValidateMessage(protocol.MsgServeResponse, sc.Bytes()); err != nil {
			t.Fatalf("response line: %v", err)
		}
		resp = protocol.ServeResponse{}
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		if !resp.Interim() {
			break
		}
	}
	inW.Close()
	go io.Copy(io.Discard, outR)
	if c := <-done; c != 0 {
		t.Fatalf("server exited %d", c)
	}
	if resp.Error != "" {
		return resp.Stdout, errb.String() + resp.Error, 1
	}
	return resp.Stdout, errb.String(), 0
}
