package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/file"
	"github.com/gcompose/gcompose/internal/testimage"
)

// What a killed run left (a file the sweep-capable file adapter wrote and
// tagged for a resource no state names) is a step of the plan, shown as
// the delete of a leftover with why it is believed ours; a deploy answered
// "no" at the prompt deletes nothing; a saved plan carries the step and
// deletes it once applied.
func TestE2ELeftoversArePlanStepsAndADeclinedDeployChangesNothing(t *testing.T) {
	tm := newTmux(t)
	e := newEnv(t)
	img := testimage.DerivedImage(t, context.Background(), "FROM "+e.image+"\nENV "+file.EnvSweep+"=1\n", fileAdapterName+"-sweep")
	f := e.write("app.yaml", strings.ReplaceAll(`
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  x:
    type: SWEEPIMAGE
    config: {path: x.txt, content: "x"}
`, "SWEEPIMAGE", img))
	e.must("deploy", f, "--yes")
	raw, err := os.ReadFile(filepath.Join(e.state, e.app+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Lineage == "" {
		t.Fatalf("state lineage: %v %q", err, doc.Lineage)
	}
	// A run killed after it wrote left.txt for resource "gone", before it
	// recorded it.
	if err := os.WriteFile(filepath.Join(e.files, "left.txt"), []byte("left"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := file.WriteTag(e.files, file.Tag{App: e.app, Lineage: doc.Lineage, Name: "gone", Operation: "op-killed", Path: "left.txt"}); err != nil {
		t.Fatal(err)
	}

	p := e.must("plan", f)
	step := regexp.MustCompile(`(?m)^\s+- delete\s+leftovers\.file\.left\.txt\s+\(leftover of an interrupted run that no state names; made for gone; written by operation op-killed; tagged with this app and state lineage ` + regexp.QuoteMeta(doc.Lineage) + `\)`)
	if !step.MatchString(p.stdout) || !strings.Contains(p.stdout, "1 to delete") {
		t.Fatalf("plan does not show the leftover's delete with why it is ours:\n%s", p.stdout)
	}
	if !e.exists("left.txt") {
		t.Fatal("plan deleted the leftover")
	}

	bin := gcomposeBinary(t)
	tm.run(e.dir, bin, "deploy", f, "--state", e.state)
	screen := tm.waitFor("the confirmation prompt", regexp.MustCompile(`Do you want to deploy\? Only 'yes' will be accepted:$`))
	if !strings.Contains(screen, "leftovers.file.left.txt") {
		t.Errorf("the plan above the prompt does not show the leftover:\n%s", screen)
	}
	tm.keys("no", "Enter")
	screen = tm.waitFor("the end of the declined deploy", regexp.MustCompile(`(?m)^exit=\d+$`))
	if strings.Contains(screen, "exit=0") {
		t.Errorf("deploy answered no exited 0:\n%s", screen)
	}
	if !e.exists("left.txt") || e.read("x.txt") != "x" {
		t.Fatalf("a deploy answered no changed something (left.txt exists %v, x.txt %q):\n%s", e.exists("left.txt"), e.read("x.txt"), screen)
	}

	planFile := filepath.Join(e.dir, "app.plan")
	e.must("plan", f, "-out", planFile)
	if !e.exists("left.txt") {
		t.Fatal("plan -out deleted the leftover")
	}
	r := e.must("deploy", planFile)
	if e.exists("left.txt") {
		t.Fatalf("the saved plan's apply left the leftover:\n%s%s", r.stdout, r.stderr)
	}
	if e.read("x.txt") != "x" {
		t.Fatalf("x.txt = %q", e.read("x.txt"))
	}
	if p := e.must("plan", f, "--detailed-exitcode"); strings.Contains(p.stdout, "leftovers.") {
		t.Fatalf("the leftover is still planned:\n%s", p.stdout)
	}
	e.must("destroy", f, "--yes")
}
