package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A first deploy whose plug directory does not exist yet creates it (it is
// inside the project) and says so, as Docker Compose does for a bind mount.
func TestE2EMissingPlugDirectoryIsCreated(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", `
meta:
  name: APP
plugs:
  files:
    path: ./not-yet/out
resources:
  a:
    type: IMAGE
    config: {path: a.txt, content: "hello\n"}
`)
	r := e.gc("deploy", f, "--yes")
	if r.code != 0 {
		t.Fatalf("deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "note: created the plug directory") || !strings.Contains(r.stderr, `not-yet/out (plug "files")`) {
		t.Errorf("deploy does not say it created the plug directory:\n%s", r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "not-yet", "out", "a.txt"))
	if err != nil || string(b) != "hello\n" {
		t.Fatalf("a.txt: %q, %v", b, err)
	}
	// Once it exists, nothing more is said.
	r = e.must("deploy", f, "--yes")
	if strings.Contains(r.stderr, "created the plug directory") {
		t.Errorf("second deploy creates the directory again:\n%s", r.stderr)
	}
	e.must("destroy", f, "--yes")
}

// A missing plug directory outside the project is not created: one plain
// line that names the plug and where it is declared, no Engine message, no
// "No changes", and no state written.
func TestE2EMissingPlugOutsideTheProjectIsOneLine(t *testing.T) {
	e := newEnv(t)
	outside := filepath.Join(t.TempDir(), "elsewhere", "out")
	f := e.write("app.yaml", `
meta:
  name: APP
plugs:
  files:
    path: `+outside+`
resources:
  a:
    type: IMAGE
    config: {path: a.txt, content: "x"}
`)
	// Outside the project a plug needs an allowance (plugs_e2e_test.go);
	// allowed, a directory that does not exist is still not created.
	r := e.gc("deploy", f, "--yes", "--allow-host-path", filepath.Dir(outside))
	if r.code != exitError {
		t.Fatalf("deploy: exit %d, want %d\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
	all := r.stdout + r.stderr
	for _, bad := range []string{"No changes", "bind source path", "Error response from daemon"} {
		if strings.Contains(all, bad) {
			t.Errorf("output has %q:\n%s", bad, all)
		}
	}
	want := f + `:5:3: plug "files": directory ` + outside + " does not exist"
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Errorf("%s was created", outside)
	}
}

// /dev/null is a character device but no terminal: deploy must not prompt
// on it and then read "no answer" as a refusal; it asks for --yes.
func TestE2EDeployFromDevNullAsksForYes(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))
	cmd := exec.Command(gcomposeBinary(t), "deploy", f, "--state", e.state)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd.Stdin = null
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != exitError {
		t.Fatalf("exit %d (%v), want %d:\n%s", cmd.ProcessState.ExitCode(), err, exitError, out)
	}
	if !strings.Contains(string(out), "pass --yes to deploy") || strings.Contains(string(out), "Only 'yes' will be accepted") {
		t.Errorf("deploy </dev/null:\n%s", out)
	}
	if e.exists("a.txt") {
		t.Error("deploy changed something without confirmation")
	}
}

// gcompose ps lists what is deployed, with its status and age; an adapter
// that declares no summary shows dashes, not guesses.
func TestE2EPs(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))
	if r := e.gc("ps", f); r.code != 0 || !strings.Contains(r.stdout, "nothing deployed") {
		t.Fatalf("ps before deploy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.must("deploy", f, "--yes")
	r := e.must("ps", f)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !regexp.MustCompile(`^NAME\s+STATUS\s+PROVIDER\s+IP\s+URL\s+AGE$`).MatchString(lines[0]) {
		t.Fatalf("ps:\n%s", r.stdout)
	}
	for _, l := range lines[1:] {
		if !regexp.MustCompile(`^resources\.[a-d]\s+Active\s+-\s+-\s+-\s+\d+s$`).MatchString(l) {
			t.Errorf("ps line %q", l)
		}
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(e.must("ps", f, "--json").stdout), &rows); err != nil || len(rows) != 4 || rows[0]["since"] == "0001-01-01T00:00:00Z" {
		t.Errorf("ps --json: %v %v", rows, err)
	}
	e.must("destroy", f, "--yes")
}

// refresh --detailed-exitcode, as plan's: 0 when what is deployed is what
// the state says, 2 when something drifted, and refresh changes nothing.
func TestE2ERefreshDetailedExitcode(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))
	e.must("deploy", f, "--yes")
	if r := e.gc("refresh", f, "--detailed-exitcode"); r.code != exitOK {
		t.Fatalf("refresh with no drift: exit %d, want %d\n%s%s", r.code, exitOK, r.stdout, r.stderr)
	}
	if err := os.Remove(filepath.Join(e.files, "c.txt")); err != nil {
		t.Fatal(err)
	}
	r := e.gc("refresh", f, "--detailed-exitcode")
	if r.code != exitChanges || !strings.Contains(r.stdout, "resources.c") {
		t.Fatalf("refresh after c.txt was removed: exit %d, want %d\n%s%s", r.code, exitChanges, r.stdout, r.stderr)
	}
	if e.exists("c.txt") {
		t.Error("refresh recreated c.txt")
	}
	// Without the flag, drift is reported but is no error.
	if r := e.gc("refresh", f); r.code != exitOK {
		t.Errorf("refresh without --detailed-exitcode: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	e.must("destroy", f, "--yes")
}
