package main

import (
	"strings"
	"testing"
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
