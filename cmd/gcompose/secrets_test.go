package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
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

func testContext() *cli.Context {
	return cli.NewContext(&cli.App{Metadata: map[string]any{redactorKey: secret.NewRedactor()}}, nil, nil)
}

// Fields an adapter marks secret are secrets of the run as soon as the
// adapter is called; an action carrying a secret in its container
// arguments is refused.
func TestSecretFields(t *testing.T) {
	c := testContext()
	inner := &recordingAdapters{}
	a := withSecretFields(c, inner, fakeInit{fields: []string{"/auth/token", "/list/1", "/absent", "/port"}})
	call := plan.Call{Name: "resources.x", Type: "img", Config: map[string]any{
		"auth": map[string]any{"token": "tok-123456"}, "list": []any{"a", "second-secret"}, "port": 5432.0, "plain": "visible",
	}}
	if _, err := a.State(context.Background(), call, protocol.Present); err != nil {
		t.Fatal(err)
	}
	red := redactor(c)
	if got := red.Redact("tok-123456 second-secret visible 5432"); got != "(sensitive) (sensitive) visible (sensitive)" {
		t.Errorf("redacted: %q", got)
	}
	_, err := a.Action(context.Background(), call, protocol.ActionSpec{Name: "create", Args: []string{"--token", "tok-123456"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "container arguments") || strings.Contains(err.Error(), "tok-123456") || inner.actions != 0 {
		t.Errorf("action with a secret argument: %v (%d run)", err, inner.actions)
	}
	if _, err := a.Action(context.Background(), call, protocol.ActionSpec{Name: "create"}, nil); err != nil || inner.actions != 1 {
		t.Errorf("plain action: %v", err)
	}
}

func TestCredentialEnv(t *testing.T) {
	t.Setenv("YAGNA_APPKEY", "appkey-abcdef")
	t.Setenv("YAGNA_API_URL", "http://127.0.0.1:7465")
	red := secret.NewRedactor()
	look := credentialEnv(red)
	for _, name := range []string{"YAGNA_APPKEY", "YAGNA_API_URL", "UNSET_VARIABLE_X"} {
		look(name)
	}
	if got := red.Redact("appkey-abcdef at http://127.0.0.1:7465"); got != "(sensitive) at http://127.0.0.1:7465" {
		t.Errorf("redacted: %q", got)
	}
}

func TestMaskPlan(t *testing.T) {
	c := testContext()
	redactor(c).Add("pw-1")
	pl := &plan.Plan{Steps: []*plan.Step{{Resource: "r", Op: plan.Update,
		Before: map[string]any{"url": "db://u:pw-0@h"}, After: map[string]any{"url": "db://u:pw-1@h", "n": 1.0}}}}
	m := maskPlan(c, pl)
	if m.Steps[0].After["url"] != secret.Mask || m.Steps[0].After["n"] != 1.0 || m.Steps[0].Before["url"] != "db://u:pw-0@h" {
		t.Errorf("masked step: %+v", m.Steps[0])
	}
	if pl.Steps[0].After["url"] != "db://u:pw-1@h" {
		t.Error("maskPlan changed the plan the engine applies")
	}
}

func TestUnsealDoc(t *testing.T) {
	key := make([]byte, 32)
	key[0] = 7
	codec, _ := secret.NewKeyCodec(key)
	env, _ := codec.Seal("pw-unseal")
	doc := &state.Document{App: "a", Resources: map[string]*state.Resource{"r": {Name: "r", Config: map[string]any{"p": env}}}}
	c := testContext()
	t.Setenv(secret.EnvKeyFile, "")
	t.Setenv(secret.EnvPassphrase, "")
	t.Setenv(secret.EnvKey, "")
	if d, err := unsealDoc(c, "a", doc); err != nil || !secret.IsEnvelope(d.Resources["r"].Config["p"]) {
		t.Errorf("without a key: %v", err)
	}
	t.Setenv(secret.EnvKey, base64.StdEncoding.EncodeToString(key))
	d, err := unsealDoc(c, "a", doc)
	if err != nil || d.Resources["r"].Config["p"] != "pw-unseal" || redactor(c).Redact("pw-unseal") != secret.Mask {
		t.Errorf("with the key: %v %v", err, d.Resources["r"].Config)
	}
}
