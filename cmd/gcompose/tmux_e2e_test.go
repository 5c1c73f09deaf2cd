package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// On a real terminal (a tmux pane): deploy shows the plan, asks, and on
// "yes" shows the live progress line while actions run, then the summary;
// destroy asked and answered "no" changes nothing. The in-process tests
// see only pipes, so this is the one test of what a person at a terminal
// sees.
func TestE2ETerminalPromptAndLiveProgress(t *testing.T) {
	tm := newTmux(t)
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(dag, "CONTENT", "1"))
	bin := gcomposeBinary(t)

	tm.run(e.dir, bin, "deploy", f, "--state", e.state)
	screen := tm.waitFor("the confirmation prompt", regexp.MustCompile(`Do you want to deploy\? Only 'yes' will be accepted:$`))
	if !strings.Contains(screen, "Plan: 4 to create, 0 to update, 0 to rebuild, 0 to delete, 0 unchanged.") {
		t.Errorf("no plan above the prompt:\n%s", screen)
	}
	if e.exists("a.txt") {
		t.Fatal("deploy changed something before the answer")
	}
	tm.keys("yes", "Enter")
	// b and c sleep 1.5s each: the live line must show them running.
	tm.waitFor("the live progress line", regexp.MustCompile(`\d+ running: .*resources\.[bc] creating`))
	screen = tm.waitFor("the end of the deploy", regexp.MustCompile(`(?m)^exit=\d+$`))
	if !strings.Contains(screen, "exit=0") || !strings.Contains(screen, "Deploy complete: 4 resource(s) changed") {
		t.Fatalf("deploy on a terminal:\n%s", screen)
	}
	// The live line is a status line: once done, it is gone, not left
	// among the results.
	if regexp.MustCompile(`(?m)\d+ running: .*\S\s*$`).MatchString(lastLines(screen, 3)) {
		t.Errorf("the live progress line is left on screen:\n%s", screen)
	}
	if e.read("d.txt") != "delta" {
		t.Errorf("d.txt: %q", e.read("d.txt"))
	}

	tm.run(e.dir, bin, "destroy", f, "--state", e.state)
	tm.waitFor("the destroy prompt", regexp.MustCompile(`Do you want to destroy\? Only 'yes' will be accepted:$`))
	tm.keys("no", "Enter")
	screen = tm.waitFor("the end of the refused destroy", regexp.MustCompile(`(?m)^exit=\d+$`))
	if strings.Contains(screen, "exit=0") || strings.Contains(screen, "Destroy complete") {
		t.Errorf("destroy answered no:\n%s", screen)
	}
	for _, n := range []string{"a.txt", "b.txt", "c.txt", "d.txt"} {
		if !e.exists(n) {
			t.Errorf("%s is gone after a destroy answered no", n)
		}
	}
	e.must("destroy", f, "--yes")
}

// tmux drives one pane of a private tmux server (its own socket, no user
// configuration), 100 columns by 30 lines.
type tmux struct {
	t    *testing.T
	dir  string
	runs int
	sock string
}

func newTmux(t *testing.T) *tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("tmux is missing and CI is set (.ci/run installs it): %v", err)
		}
		t.Skip("tmux is not installed (apt-get install -y tmux)")
	}
	tm := &tmux{t: t, dir: t.TempDir()}
	t.Cleanup(func() { exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	return tm
}

func (tm *tmux) cmd(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// run starts argv in a fresh window, then prints its exit status and
// keeps the pane open to be read.
func (tm *tmux) run(dir string, argv ...string) {
	tm.t.Helper()
	var q []string
	for _, a := range argv {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	// NO_COLOR: the screen is compared as text; colour has its own golden
	// test (internal/progress).
	script := "clear; NO_COLOR=1 " + strings.Join(q, " ") + "; rc=$?; echo; echo exit=$rc; sleep 600"
	// A server of its own per run: a new session on the socket of a server
	// that is still exiting fails with "server exited unexpectedly" (seen in CI).
	if tm.sock != "" {
		tm.exec("kill-server")
	}
	tm.runs++
	tm.sock = filepath.Join(tm.dir, fmt.Sprintf("tmux-%d.sock", tm.runs))
	tm.cmd("new-session", "-d", "-x", "100", "-y", "30", "-c", dir, "sh", "-c", script)
}

// exec runs a tmux command whose failure does not matter (no server yet).
func (tm *tmux) exec(args ...string) {
	exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...).Run()
}

func (tm *tmux) keys(keys ...string) {
	tm.t.Helper()
	tm.cmd(append([]string{"send-keys", "-t", "0"}, keys...)...)
}

func (tm *tmux) screen() string {
	tm.t.Helper()
	return tm.cmd("capture-pane", "-p", "-t", "0")
}

// waitFor polls the screen until re matches it, and returns that screen.
func (tm *tmux) waitFor(what string, re *regexp.Regexp) string {
	tm.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var s string
	for {
		s = tm.screen()
		if re.MatchString(strings.TrimRight(s, "\n ")) {
			return s
		}
		select {
		case <-ctx.Done():
			tm.t.Fatalf("no %s on the terminal (%s); the screen:\n%s", what, re, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n "), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
