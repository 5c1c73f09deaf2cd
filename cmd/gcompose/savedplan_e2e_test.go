package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gcProcess runs the CLI as its own process, as CI runs plan and deploy in
// separate jobs.
func (e *env) gcProcess(args ...string) result {
	e.t.Helper()
	cmd := exec.Command(gcomposeBinary(e.t), append(args, "--state", e.state)...)
	cmd.Dir = e.dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("running gcompose: %v", err)
	}
	return result{code, out.String(), errb.String()}
}

const pair = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  x:
    type: IMAGE
    config: {path: x.txt, content: "x-CONTENT"}
  y:
    type: IMAGE
    config: {path: y.txt, content: "y-CONTENT"}
  z:
    type: IMAGE
    config: {path: z.txt, content: "z reads ${resources.x.state.sha256}"}
`

// Plan to a file in one process, deploy it from another; the same file is
// refused once the state changed.
func TestE2ESavedPlan(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "1"))
	e.must("deploy", f, "--yes")
	f = e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "2"))
	planFile := filepath.Join(e.dir, "app.plan")

	if r := e.gcProcess("plan", f, "-out", planFile); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "Saved the plan") {
		t.Fatalf("plan -out: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if fi, err := os.Stat(planFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved plan: %v, mode %v; want an owner-only file", err, fi)
	}
	// A later change of the descriptor that is not applied must not sneak
	// into the reviewed plan: the file refuses it.
	e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "9"))
	r := e.gcProcess("deploy", planFile)
	if r.code == 0 || !strings.Contains(r.stderr, "descriptor inputs changed") {
		t.Fatalf("deploy of a plan whose descriptor changed: exit %d, want a refusal naming the inputs\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := e.read("x.txt"); got != "x-1" {
		t.Fatalf("x.txt = %q after a refused plan, want x-1", got)
	}
	e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "2"))

	// No --yes, no terminal: a saved plan is not asked about again.
	r = e.gcProcess("deploy", planFile)
	if r.code != 0 {
		t.Fatalf("deploy %s: exit %d\n%s%s", planFile, r.code, r.stdout, r.stderr)
	}
	if x, y := e.read("x.txt"), e.read("y.txt"); x != "x-2" || y != "y-2" {
		t.Fatalf("after the saved plan: x %q, y %q; want x-2, y-2", x, y)
	}

	// Applied once, the state moved on: the same file is now stale.
	r = e.gcProcess("deploy", planFile)
	if r.code == 0 || !strings.Contains(r.stderr, "the state changed since it was made") {
		t.Fatalf("second deploy of the same plan: exit %d, want a refusal naming the state\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A real adapter changes its answer between plan and apply: x, planned as
// an in-place update, is found gone at apply and would be created anew.
// It fails as inconsistent, is not touched, holds back z (which reads it),
// and y still applies.
func TestE2EApplyRefusesAChangeMoreDestructiveThanApproved(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "1"))
	e.must("deploy", f, "--yes")
	zBefore := e.read("z.txt")
	f = e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "2"))
	planFile := filepath.Join(e.dir, "app.plan")
	p := e.must("plan", f, "-out", planFile)
	if !strings.Contains(p.stdout, "~ update    resources.x") {
		t.Fatalf("plan does not update x in place:\n%s", p.stdout)
	}
	if err := os.Remove(filepath.Join(e.files, "x.txt")); err != nil {
		t.Fatal(err)
	}
	r := e.gc("deploy", planFile)
	if r.code == 0 || !strings.Contains(r.stderr, "inconsistent with the approved plan") || !strings.Contains(r.stderr, "resources.x") {
		t.Fatalf("deploy: exit %d, want resources.x inconsistent with the approved plan\n%s%s", r.code, r.stdout, r.stderr)
	}
	if e.exists("x.txt") {
		t.Fatal("x.txt was created although the approved plan said update")
	}
	if got := e.read("y.txt"); got != "y-2" {
		t.Fatalf("y.txt = %q, want y-2: the independent rest applies", got)
	}
	if got := e.read("z.txt"); got != zBefore {
		t.Fatalf("z.txt changed to %q: z depends on x and must be held back", got)
	}
}
