package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
)

// reconcileApp: b reads a's checksum; other depends on nothing.
const reconcileApp = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  a:
    type: IMAGE
    config: {path: a.txt, content: "alpha"}
  b:
    type: IMAGE
    config: {path: b.txt, content: "a is ${resources.a.state.sha256}"}
  other:
    type: IMAGE
    config: {path: other.txt, content: "OTHER"}
`

// reconcileEvents parses and schema-checks reconcile's JSON stream.
func reconcileEvents(t *testing.T, stdout string) []progress.Event {
	t.Helper()
	var out []progress.Event
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if line == "" {
			continue
		}
		if err := progress.ValidateLine([]byte(line)); err != nil {
			t.Fatalf("event %s does not match schemas/events.schema.json: %v", line, err)
		}
		var ev progress.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func phasesOf(evs []progress.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Resource == "" || ev.Phase == "drift" {
			out = append(out, ev.Phase)
		}
	}
	return out
}

// TestE2EReconcileCLI runs gcompose reconcile --cycles 1 on a file-adapter
// app with the file state: a file deleted behind gcompose's back is made
// again with its knock-on and nothing else; a descriptor edited and not
// deployed stops every repair (exit 1, saying why); a healthy app exits 0.
func TestE2EReconcileCLI(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(reconcileApp, "OTHER", "omega"))
	e.must("deploy", f, "--yes")
	reconcile := func(args ...string) result {
		t.Helper()
		return e.gc(append([]string{"reconcile", f, "--cycles", "1", "--interval", "100ms", "--listen", "", "--json"}, args...)...)
	}

	r := reconcile()
	if r.code != 0 || len(reconcileEvents(t, r.stdout)) != 2 { // leading, no longer leading
		t.Fatalf("healthy: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "the state is not in etcd: this reconciler leads alone") {
		t.Fatalf("no warning about running alone:\n%s", r.stderr)
	}

	otherBefore, err := os.Stat(filepath.Join(e.files, "other.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(e.files, "a.txt")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // a rewrite of other.txt would show in its mtime
	r = reconcile()
	evs := reconcileEvents(t, r.stdout)
	if r.code != 0 || strings.Join(phasesOf(evs), " ") != "leader drift repair repaired leader" {
		t.Fatalf("repair: exit %d, phases %v\nstdout:\n%s\nstderr:\n%s", r.code, phasesOf(evs), r.stdout, r.stderr)
	}
	for _, ev := range evs {
		if ev.Phase == "repair" && !strings.Contains(ev.Message, "knock-ons: resources.b") {
			t.Fatalf("repair event: %s", ev.Message)
		}
		if ev.Phase == "repaired" && (ev.DurationMS == nil || !strings.Contains(ev.Message, "create resources.a")) {
			t.Fatalf("repaired event: %+v", ev)
		}
	}
	if got := e.read("a.txt"); got != "alpha" {
		t.Fatalf("a.txt after the repair: %q", got)
	}
	if otherAfter, err := os.Stat(filepath.Join(e.files, "other.txt")); err != nil || !otherAfter.ModTime().Equal(otherBefore.ModTime()) {
		t.Fatalf("other.txt, which did not drift, was written again (%v)", err)
	}
	if !strings.Contains(r.stderr, "msg=\"repaired resources.a") {
		t.Fatalf("no log line for the repair:\n%s", r.stderr)
	}

	// Edited, not deployed: nothing is repaired.
	f = e.write("app.yaml", strings.ReplaceAll(reconcileApp, "OTHER", "changed"))
	if err := os.Remove(filepath.Join(e.files, "a.txt")); err != nil {
		t.Fatal(err)
	}
	r = reconcile()
	if r.code != 1 || !strings.Contains(r.stderr, "resources.other: its config differs from the one deployed (content)") || e.exists("a.txt") {
		t.Fatalf("undeployed change: exit %d, a.txt exists %v\nstdout:\n%s\nstderr:\n%s", r.code, e.exists("a.txt"), r.stdout, r.stderr)
	}
	evs = reconcileEvents(t, r.stdout)
	if p := strings.Join(phasesOf(evs), " "); p != "leader drift intent leader" {
		t.Fatalf("undeployed change: phases %s", p)
	}
	if got := e.read("other.txt"); got != "omega" {
		t.Fatalf("other.txt = %q: the change was applied", got)
	}
}
