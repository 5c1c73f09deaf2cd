package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/misbehave"
	"github.com/gcompose/gcompose/internal/testimage"
)

// These tests drive misbehaving adapter images (cmd/misbehave-adapter, modes
// documented in package adapters/misbehave) through the whole engine with
// the real CLI, next to a good file-adapter resource: each failure is named
// with its resource, call and reason, the rest of the application is
// unharmed, the state stays valid, no container is left, and removing the
// bad resources converges.

const misbehaveName = "gcompose-test/misbehave-adapter:e2e"

// buildMisbehave returns the misbehave image's reference.
func buildMisbehave(t *testing.T) string {
	t.Helper()
	return testimage.Image(t, context.Background(), "./cmd/misbehave-adapter", misbehaveName)
}

// initVariant builds a misbehave image whose init misbehaves in mode and
// returns its reference.
func initVariant(t *testing.T, mode string) string {
	t.Helper()
	base := buildMisbehave(t)
	return testimage.DerivedImage(t, context.Background(), misbehave.InitVariantDockerfile(base, mode), misbehaveName+"-init-"+mode)
}

// misbehavingApp writes the descriptor: a good file resource, then bad.
func (e *env) misbehavingApp(bad string) string {
	e.t.Helper()
	return e.write("app.yaml", `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  good:
    type: IMAGE
    config: {path: good.txt, content: "good"}
`+strings.ReplaceAll(bad, "MISBEHAVE", buildMisbehave(e.t)))
}

// fixedApp is the descriptor without the bad resources.
func (e *env) fixedApp() string { return e.misbehavingApp("") }

// wantFailure checks that the error output names resource with every one of
// the reason fragments on its line (or the stderr tail lines that follow it).
func wantFailure(t *testing.T, out, resource string, reason ...string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^.*` + regexp.QuoteMeta(resource) + `: .*(\n {4,}.*)*`)
	for _, block := range re.FindAllString(out, -1) {
		ok := true
		for _, r := range reason {
			ok = ok && strings.Contains(block, r)
		}
		if ok {
			return
		}
	}
	t.Errorf("the error does not name %s with %q:\n%s", resource, reason, out)
}

// assertStateValid checks that the state document and its journal are JSON
// and that the CLI reads them.
func (e *env) assertStateValid() {
	e.t.Helper()
	doc, err := os.ReadFile(filepath.Join(e.state, e.app+".json"))
	if err != nil {
		e.t.Fatalf("state document: %v", err)
	}
	if !json.Valid(doc) {
		e.t.Fatalf("state document is not JSON:\n%s", doc)
	}
	if j, err := os.ReadFile(filepath.Join(e.state, e.app+".journal")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(j))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) > 0 && !json.Valid(sc.Bytes()) {
				e.t.Fatalf("state journal line is not JSON: %s", sc.Text())
			}
		}
	}
	e.must("state", "list", "--app", e.app)
}

// statusOf returns a resource's status in `gcompose state list`, "" if absent.
func (e *env) statusOf(resource string) string {
	e.t.Helper()
	ls := e.must("state", "list", "--app", e.app)
	for _, line := range strings.Split(ls.stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == resource {
			return f[1]
		}
	}
	return ""
}

// converge deploys the fixed descriptor and checks that the application is
// just the good resource, and stays so.
func (e *env) converge() {
	e.t.Helper()
	f := e.fixedApp()
	r := e.must("deploy", f, "--yes", "--call-timeout", "30s")
	if e.read("good.txt") != "good" || e.statusOf("resources.good") != "Active" {
		e.t.Fatalf("good not Active after the fix:\n%s%s", r.stdout, r.stderr)
	}
	ls := e.must("state", "list", "--app", e.app)
	if n := strings.Count(ls.stdout, "resources."); n != 1 {
		e.t.Fatalf("after the fix the state holds %d resources, want only good:\n%s", n, ls.stdout)
	}
	if r := e.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") {
		e.t.Fatalf("not converged after the fix:\n%s%s", r.stdout, r.stderr)
	}
	e.assertNoContainers()
	e.must("destroy", f, "--yes")
}

// Every way a state answer can be broken, in independent resources, found
// while planning: all are reported, each with its call and reason.
// A resource that cannot be planned holds back only what depends on it:
// good, independent of them all, is applied; the fixed descriptor converges.
const badAtPlan = `
  hang:
    type: MISBEHAVE
    config: {mode: hang, when: deploy}
  garbage:
    type: MISBEHAVE
    config: {mode: garbage, when: deploy}
  wrong-schema:
    type: MISBEHAVE
    config: {mode: wrong-schema, when: deploy}
  exit-nonzero:
    type: MISBEHAVE
    config: {mode: exit-nonzero, when: deploy, message: "boom from the adapter"}
  huge-output:
    type: MISBEHAVE
    config: {mode: huge-output, when: deploy}
`

func TestE2EMisbehavingStateAnswersAtPlan(t *testing.T) {
	e := newEnv(t)
	buildMisbehave(t)
	f := e.misbehavingApp(badAtPlan)
	start := time.Now()
	r := e.gc("deploy", f, "--yes", "--call-timeout", "5s")
	if r.code != exitError {
		t.Fatalf("deploy: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("deploy took %s: the hanging call was not cut at 5s", d)
	}
	wantFailure(t, r.stderr, "resources.hang", "call state", "timed out after 5s", "misbehave: hanging")
	wantFailure(t, r.stderr, "resources.garbage", "state call", "not JSON", `stdout began "this is not JSON {"`)
	wantFailure(t, r.stderr, "resources.wrong-schema", "state call", `(root): missing property "state"`, `property "colour" not allowed`)
	wantFailure(t, r.stderr, "resources.exit-nonzero", "call state", "exit code 3", "misbehave: boom from the adapter")
	wantFailure(t, r.stderr, "resources.huge-output", "call state", "more than 4194304 bytes to stdout")
	if !e.exists("good.txt") {
		t.Errorf("good, independent of every failing resource, was not applied")
	}
	e.assertNoContainers()
	e.assertStateValid()
	e.converge()
}

// The same failures once planning is done: the state calls of hang, garbage
// and wrong-schema read good's output, so they are first made during apply;
// exit-nonzero and huge-output misbehave in their action; lying answers
// STALE again after its action. good is created and recorded Active; the
// failed resources that ran an action are recorded Pending.
const badAtApply = `
  hang:
    type: MISBEHAVE
    config: {mode: hang, when: deploy, message: "${resources.good.state.sha256}"}
  garbage:
    type: MISBEHAVE
    config: {mode: garbage, when: deploy, message: "${resources.good.state.sha256}"}
  wrong-schema:
    type: MISBEHAVE
    config: {mode: wrong-schema, when: deploy, message: "${resources.good.state.sha256}"}
  exit-nonzero:
    type: MISBEHAVE
    config: {mode: exit-nonzero, on: action, when: deploy, message: "boom from the adapter"}
  huge-output:
    type: MISBEHAVE
    config: {mode: huge-output, on: action, when: deploy}
  lying:
    type: MISBEHAVE
    config: {mode: lying, when: deploy}
`

func TestE2EMisbehavingAdaptersAtApply(t *testing.T) {
	e := newEnv(t)
	buildMisbehave(t)
	f := e.misbehavingApp(badAtApply)
	r := e.gc("deploy", f, "--yes", "--call-timeout", "5s")
	if r.code != exitError || !strings.Contains(r.stderr, "6 resource(s) failed") {
		t.Fatalf("deploy: exit %d, want %d with 6 failures\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	wantFailure(t, r.stderr, "resources.hang", "call state", "timed out after 5s", "misbehave: hanging")
	wantFailure(t, r.stderr, "resources.garbage", "state call", "not JSON", `stdout began "this is not JSON {"`)
	wantFailure(t, r.stderr, "resources.wrong-schema", "state call", `(root): missing property "state"`, `property "colour" not allowed`)
	wantFailure(t, r.stderr, "resources.exit-nonzero", "call action misbehave", "exit code 3", "misbehave: boom from the adapter")
	wantFailure(t, r.stderr, "resources.huge-output", "call action misbehave", "more than 4194304 bytes to stdout")
	wantFailure(t, r.stderr, "resources.lying", "answered STALE again after its actions ran")
	if e.read("good.txt") != "good" {
		t.Fatalf("good.txt = %q", e.read("good.txt"))
	}
	e.assertNoContainers()
	e.assertStateValid()
	want := map[string]string{
		"resources.good": "Active",
		// Their state call failed before any action: nothing to record.
		"resources.hang": "", "resources.garbage": "", "resources.wrong-schema": "",
		// An action ran and failed (or its state after it was not VALID):
		// recorded with its pending operation, shown Failed.
		"resources.exit-nonzero": "Failed", "resources.huge-output": "Failed", "resources.lying": "Failed",
	}
	for res, st := range want {
		if got := e.statusOf(res); got != st {
			t.Errorf("%s: status %q, want %q", res, got, st)
		}
	}
	e.converge()
}

// An init answering a protocol version this gcompose does not speak is
// refused naming the image and both versions; the good resource is unharmed
// by it only in that nothing is applied (the failure is found planning).
func TestE2EInitWrongProtocol(t *testing.T) {
	e := newEnv(t)
	tag := initVariant(t, misbehave.InitWrongProtocol)
	f := e.misbehavingApp("  bad:\n    type: " + tag + "\n    config: {}\n")
	r := e.gc("deploy", f, "--yes", "--call-timeout", "30s")
	if r.code != exitError {
		t.Fatalf("deploy: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	wantFailure(t, r.stderr, "resources.bad", "init call", "adapter image "+tag+" speaks gcompose protocol 2, this gcompose speaks 1")
	e.assertNoContainers()
	e.converge()
}

// A hanging init is killed by the call timeout.
func TestE2EInitHangIsKilledByTheTimeout(t *testing.T) {
	e := newEnv(t)
	tag := initVariant(t, "hang")
	f := e.misbehavingApp("  bad:\n    type: " + tag + "\n    config: {}\n")
	start := time.Now()
	r := e.gc("deploy", f, "--yes", "--call-timeout", "5s")
	if r.code != exitError {
		t.Fatalf("deploy: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("deploy took %s: the hanging init was not cut at 5s", d)
	}
	wantFailure(t, r.stderr, "resources.bad", "init", tag, "timed out after 5s")
	e.assertNoContainers()
	e.converge()
}
