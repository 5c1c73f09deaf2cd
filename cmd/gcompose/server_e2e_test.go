package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/internal/testimage"
)

// sdkApp is one resource of the SDK test adapter (served): its write
// action reports identity, then waits for out/<await> to exist.
func (e *env) sdkApp(await string) string {
	e.t.Helper()
	image := testimage.Image(e.t, context.Background(), "./internal/testimage/testdata/sdkadapter", "gcompose-test/sdkadapter:e2e")
	body := "meta:\n  name: " + e.app + "\nplugs:\n  data:\n    path: ./out\nresources:\n  r:\n    type: " + image +
		"\n    config: {content: hello, await: " + await + "}\n"
	p := filepath.Join(e.dir, "sdk.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitFor polls cond for up to 60 s.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("waited 60s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (e *env) containers() []string {
	return testimage.ContainersLabelled(e.t, context.Background(), "gcompose.app", e.app)
}

// TestE2EServerDoesNotOutliveGcompose kills a real gcompose with SIGKILL
// while a served adapter is in the middle of a create, then of a delete.
// The server sees its stdin close: the create is cancelled and rolls back,
// the delete runs to its end; either way the container exits and is gone,
// and the next run converges.
func TestE2EServerDoesNotOutliveGcompose(t *testing.T) {
	e := newEnv(t)
	f := e.sdkApp("release")

	cmd, out := e.start("deploy", f, "--yes")
	e.waitFor("the create to be under way", func() bool { return e.exists("r") })
	if n := len(e.containers()); n != 1 {
		t.Fatalf("%d containers while the create runs, want the one server", n)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	e.waitFor("the server to go away", func() bool { return len(e.containers()) == 0 })
	if !e.exists("r.rolled-back") || e.exists("r") {
		t.Fatalf("the cancelled create did not roll back (rolled-back %t, file %t)\n%s", e.exists("r.rolled-back"), e.exists("r"), out)
	}
	os.Remove(filepath.Join(e.files, "r.rolled-back"))

	os.WriteFile(filepath.Join(e.files, "release"), nil, 0o644)
	r := e.must("deploy", f, "--yes")
	if e.read("r") != "hello" || !strings.Contains(r.stderr, "interrupted create") {
		t.Fatalf("recovery deploy:\n%s%s", r.stdout, r.stderr)
	}

	// A delete left running when gcompose dies goes on to its end.
	os.Remove(filepath.Join(e.files, "release"))
	cmd, out = e.start("destroy", f, "--yes")
	e.waitFor("the delete to be under way", func() bool { return e.exists("r.deleting") })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	time.Sleep(time.Second)
	if !e.exists("r") || len(e.containers()) != 1 {
		t.Fatalf("the delete did not go on after gcompose died (file %t, containers %v)\n%s", e.exists("r"), e.containers(), out)
	}
	os.WriteFile(filepath.Join(e.files, "release"), nil, 0o644)
	e.waitFor("the server to finish the delete and go away", func() bool { return len(e.containers()) == 0 })
	if e.exists("r") {
		t.Fatal("the delete did not finish")
	}
	e.must("destroy", f, "--yes")
	if r := e.must("state", "list", "--app", e.app); strings.Contains(r.stdout, "resources.r") {
		t.Fatalf("state not empty after destroy:\n%s", r.stdout)
	}
}
