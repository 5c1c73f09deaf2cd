package project

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/protocol"
)

type fakeInit struct{ fields []string }

func (f fakeInit) Init(context.Context, string, string) (*adapter.Info, error) {
	return &adapter.Info{Ext: true, Init: protocol.InitResult{Gcompose: &protocol.InitExt{Protocol: 1, SecretFields: f.fields}}}, nil
}

type recordingAdapters struct {
	plan.Adapters
	actions int
}

func (r *recordingAdapters) State(context.Context, plan.Call, string) (*protocol.StateResult, error) {
	return &protocol.StateResult{Status: protocol.Valid}, nil
}

func (r *recordingAdapters) Action(context.Context, plan.Call, protocol.ActionSpec, json.RawMessage) (*plan.ActionOutcome, error) {
	r.actions++
	return &plan.ActionOutcome{}, nil
}

// Fields an adapter marks secret are secrets of the run as soon as the
// adapter is called; an action carrying a secret in its container
// arguments is refused, with a typed error that does not quote it.
func TestSecretFields(t *testing.T) {
	red := secret.NewRedactor()
	inner := &recordingAdapters{}
	a := GuardAdapters(inner, fakeInit{fields: []string{"/auth/token", "/list/1", "/absent", "/port"}}, red)
	call := plan.Call{Name: "resources.x", Type: "img", Config: map[string]any{
		"auth": map[string]any{"token": "tok-123456"}, "list": []any{"a", "second-secret"}, "port": 5432.0, "plain": "visible",
	}}
	if _, err := a.State(context.Background(), call, protocol.Present); err != nil {
		t.Fatal(err)
	}
	if got := red.Redact("tok-123456 second-secret visible 5432"); got != "(sensitive) (sensitive) visible (sensitive)" {
		t.Errorf("redacted: %q", got)
	}
	_, err := a.Action(context.Background(), call, protocol.ActionSpec{Name: "create", Args: []string{"--token", "tok-123456"}}, nil)
	var se *SecretArgsError
	if !errors.As(err, &se) || se.Resource != "resources.x" || !strings.Contains(err.Error(), "container arguments") || strings.Contains(err.Error(), "tok-123456") || inner.actions != 0 {
		t.Errorf("action with a secret argument: %v (%d run)", err, inner.actions)
	}
	if _, err := a.Action(context.Background(), call, protocol.ActionSpec{Name: "create"}, nil); err != nil || inner.actions != 1 {
		t.Errorf("plain action: %v", err)
	}
}

func TestCredentialEnv(t *testing.T) {
	env := map[string]string{"YAGNA_APPKEY": "appkey-abcdef", "YAGNA_API_URL": "http://127.0.0.1:7465"}
	red := secret.NewRedactor()
	look := CredentialEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }, red)
	for _, name := range []string{"YAGNA_APPKEY", "YAGNA_API_URL", "UNSET_VARIABLE_X"} {
		look(name)
	}
	if got := red.Redact("appkey-abcdef at http://127.0.0.1:7465"); got != "(sensitive) at http://127.0.0.1:7465" {
		t.Errorf("redacted: %q", got)
	}
}

// A secret field that is not a string is masked as its JSON text in both
// forms our outputs write: json.Marshal's (HTML-escaped) and the
// unescaped one of JSON events, plans and diffs.
func TestSecretFieldObject(t *testing.T) {
	red := secret.NewRedactor()
	a := GuardAdapters(&recordingAdapters{}, fakeInit{fields: []string{"/auth"}}, red)
	auth := map[string]any{"user": "app", "token": "a<b&c>d"}
	call := plan.Call{Name: "resources.x", Type: "img", Config: map[string]any{"auth": auth}}
	if _, err := a.State(context.Background(), call, protocol.Present); err != nil {
		t.Fatal(err)
	}
	html, _ := json.Marshal(auth)
	for _, out := range []string{string(html), `{"token":"a<b&c>d","user":"app"}`} {
		if got := red.Redact("auth=" + out); got != "auth="+secret.Mask {
			t.Errorf("Redact(%q) = %q", out, got)
		}
	}
}
