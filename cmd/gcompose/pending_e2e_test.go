package main

import (
	"strings"
	"testing"
)

// The note on what a killed run left pending is printed once, by the run
// that resolves it: not by plan or refresh, which leave it pending (plan
// then deploy printed it twice, "resolved" the first time).
func TestE2EPendingNotedOnce(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", "meta:\n  name: APP\nplugs:\n  files:\n    path: ./out\nresources:\n  r0:\n    type: IMAGE\n    config: {path: r0.txt, content: v0}\n")
	// Killed right after the create returned, before it was recorded: the
	// create stays pending in the state.
	if crashed, out := e.runCrashing(2, "deploy", f, "--yes"); !crashed {
		t.Fatalf("the deploy was not killed at its create:\n%s", out)
	}
	const note = "resources.r0 had an interrupted create"
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"plan", f}, 0},
		{[]string{"refresh", f}, 0},
		{[]string{"deploy", f, "--yes"}, 1},
		{[]string{"deploy", f, "--yes"}, 0}, // resolved: nothing pending any more
	} {
		r := e.must(c.args...)
		if n := strings.Count(r.stdout+r.stderr, note); n != c.want {
			t.Errorf("gcompose %s printed %q %d times, want %d:\n%s%s", c.args[0], note, n, c.want, r.stdout, r.stderr)
		}
	}
	e.must("destroy", f, "--yes")
}
