package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
)

func testContext() *cli.Context {
	return cli.NewContext(&cli.App{Metadata: map[string]any{redactorKey: secret.NewRedactor()}}, nil, nil)
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

// A plan printed to a terminal wraps its lines; a secret in a step's error
// (a config quoted by its schema's violation) or planned output is masked
// before, since the output's redactor cannot recognise one split across
// lines.
func TestMaskPlanBeforeWrapping(t *testing.T) {
	c := testContext()
	const pw = "pw-0123456789abcdef0123456789abcdef"
	redactor(c).Add(pw)
	pl := &plan.Plan{Steps: []*plan.Step{
		{Resource: "resources.bad", Op: plan.Failed, Error: fmt.Sprintf("resources.bad: config invalid at /mode: %q does not match the pattern", pw)},
		{Resource: "resources.out", Op: plan.Update, Before: map[string]any{"n": 1.0}, After: map[string]any{"n": 2.0},
			Planned: map[string]any{"/token": "token " + pw}},
	}}
	var out bytes.Buffer
	w := redactor(c).Writer(&out)
	maskPlan(c, pl).Render(w, plan.RenderOptions{Width: 50})
	w.Flush()
	if strings.Contains(out.String(), "0123456789") || !strings.Contains(out.String(), secret.Mask) {
		t.Errorf("a secret shows in the plan as a terminal prints it:\n%s", out.String())
	}
	if pl.Steps[0].Error == secret.Mask || pl.Steps[1].Planned["/token"] == secret.Mask {
		t.Error("maskPlan changed the plan the engine applies")
	}
}

// A secret field holding an object shows as (sensitive) in a plan, not
// leaf by leaf where it changes.
func TestMaskPlanStructuredSecret(t *testing.T) {
	c := testContext()
	before := map[string]any{"user": "app", "token": "tok-0123456789"}
	after := map[string]any{"user": "app", "token": "tok-9876543210"}
	redactor(c).AddValue(before)
	redactor(c).AddValue(after)
	pl := &plan.Plan{Steps: []*plan.Step{{Resource: "resources.db", Op: plan.Update,
		Before: map[string]any{"auth": before, "port": 5432}, After: map[string]any{"auth": after, "port": 5433}}}}
	var out bytes.Buffer
	w := redactor(c).Writer(&out)
	maskPlan(c, pl).Render(w, plan.RenderOptions{})
	w.Flush()
	if strings.Contains(out.String(), "0123456789") || strings.Contains(out.String(), "9876543210") || !strings.Contains(out.String(), "/port = 5432 -> 5433") {
		t.Errorf("the secret field in the plan:\n%s", out.String())
	}
}
