package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/misbehave"
)

// An adapter that says at plan time that a change cannot succeed
// (gcompose.refuse in its state answer): plan exits 1 naming the resource
// and the adapter's message (also with --detailed-exitcode, where 2 would
// mean "changes"), and deploy refuses before any action: good, independent
// of the refused resource, is not created either.
func TestE2EAdapterRefusalStopsPlanAndDeploy(t *testing.T) {
	e := newEnv(t)
	f := e.misbehavingApp(`
  priced:
    type: MISBEHAVE
    config: {mode: refuse, message: "no offer within the caps: the cheapest asks 0.2 GLM/h"}
`)
	for _, args := range [][]string{{"plan", f}, {"plan", f, "--detailed-exitcode"}} {
		r := e.gc(args...)
		if r.code != exitError {
			t.Fatalf("%s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, exitError, r.stdout, r.stderr)
		}
		wantFailure(t, r.stderr, "resources.priced", "refused by its adapter", "no offer within the caps: the cheapest asks 0.2 GLM/h")
	}
	r := e.gc("deploy", f, "--yes")
	if r.code != exitError || !strings.Contains(r.stderr, "nothing was changed") {
		t.Fatalf("deploy: exit %d, want %d saying nothing was changed\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	wantFailure(t, r.stderr, "resources.priced", "refused by its adapter", "no offer within the caps")
	if e.exists("good.txt") {
		t.Errorf("a refused deploy created good.txt")
	}
	if st := e.statusOf("resources.good"); st != "" {
		t.Errorf("a refused deploy recorded resources.good as %q", st)
	}
	e.assertNoContainers()
	e.converge()
}

// The plan is the whole contract: an adapter that answers other actions
// at apply than the saved plan showed (the same op, create) fails its
// resource as inconsistent with the approved plan, runs none of them and
// records nothing for it; the independent rest applies.
func TestE2EOtherActionsAtApplyAreInconsistent(t *testing.T) {
	e := newEnv(t)
	img := initVariant(t, misbehave.InitEnv)
	f := e.misbehavingApp(strings.ReplaceAll(`
  switch:
    type: ENVIMAGE
    config: {mode: switch}
`, "ENVIMAGE", img))
	planFile := filepath.Join(e.dir, "app.plan")
	t.Setenv(misbehave.EnvAction, "one")
	p := e.must("plan", f, "-out", planFile)
	if !strings.Contains(p.stdout, "misbehave-one") {
		t.Fatalf("plan does not show the action misbehave-one:\n%s", p.stdout)
	}
	t.Setenv(misbehave.EnvAction, "two")
	r := e.gc("deploy", planFile)
	if r.code != exitError {
		t.Fatalf("deploy: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	wantFailure(t, r.stderr, "resources.switch", "inconsistent with the approved plan", "approved the actions misbehave-one, but the adapter now answers misbehave-two")
	if st := e.statusOf("resources.switch"); st != "" {
		t.Errorf("resources.switch recorded %q although nothing of it was approved", st)
	}
	if e.read("good.txt") != "good" {
		t.Errorf("good, independent of switch, was not applied")
	}
	e.assertNoContainers()
	e.must("deploy", f, "--yes")
	if st := e.statusOf("resources.switch"); st != "Active" {
		t.Errorf("after a new plan, resources.switch is %q, want Active", st)
	}
	e.must("destroy", f, "--yes")
}
