package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
)

// startJSON starts the real binary with --json and returns a channel of
// the JSON lines it writes to stderr, as they come.
func (e *env) startJSON(args ...string) (*exec.Cmd, <-chan map[string]any, *strings.Builder) {
	e.t.Helper()
	cmd := exec.Command(gcomposeBinary(e.t), append(args, "--state", e.state, "--json")...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	lines := make(chan map[string]any, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if err := progress.ValidateLine(sc.Bytes()); err != nil && strings.HasPrefix(sc.Text(), "{") {
				e.t.Errorf("event %s: %v", sc.Text(), err)
			}
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			} else {
				lines <- map[string]any{"text": sc.Text()}
			}
		}
	}()
	return cmd, lines, &stdout
}

// waitEvent reads events until one matches, failing after 60 s; it
// returns every event read.
func waitEvent(t *testing.T, lines <-chan map[string]any, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	var seen []map[string]any
	timeout := time.After(60 * time.Second)
	for {
		select {
		case ev, ok := <-lines:
			if !ok {
				t.Fatalf("the run ended before the event; saw %v", seen)
			}
			seen = append(seen, ev)
			if match(ev) {
				return seen
			}
		case <-timeout:
			t.Fatalf("no such event in 60 s; saw %v", seen)
		}
	}
}

func drain(lines <-chan map[string]any) (all []map[string]any) {
	for ev := range lines {
		all = append(all, ev)
	}
	return all
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return ee.ExitCode()
}

func phaseOf(ev map[string]any) string { s, _ := ev["phase"].(string); return s }

// TestE2EInterrupt: a first SIGINT while the first action of a 6-resource
// chain runs lets that action finish and be recorded, starts nothing else,
// says what it waits for, and exits 130 saying "interrupted", with a JSON
// summary that says so. A second SIGINT aborts the action under way at
// once; its operation stays pending; never "context canceled". After
// each, the next deploy converges, creating every file exactly once.
func TestE2EInterrupt(t *testing.T) {
	e := newEnv(t)
	// Slow actions, so that the interrupt lands inside one.
	f := e.write("app.yaml", strings.ReplaceAll(chain(6), "delay_ms: 300", "delay_ms: 3000"))
	cmd, lines, stdout := e.startJSON("deploy", f, "--yes")
	waitEvent(t, lines, func(ev map[string]any) bool { return phaseOf(ev) == "action" && ev["resource"] == "resources.r0" })
	cmd.Process.Signal(syscall.SIGINT)
	events := drain(lines)
	code := exitCode(t, cmd.Wait())
	var interrupt, summary map[string]any
	for _, ev := range events {
		switch {
		case phaseOf(ev) == "interrupt":
			interrupt = ev
		case ev["type"] == "summary":
			summary = ev
		}
	}
	if code != exitInterrupted || interrupt == nil || summary == nil {
		t.Fatalf("exit %d, interrupt event %v, summary %v\n%v", code, interrupt, summary, events)
	}
	if msg := interrupt["message"].(string); !strings.Contains(msg, "waiting up to 5m0s for the actions under way: resources.r0 (creating, ") {
		t.Fatalf("interrupt message %q does not say what it waits for", msg)
	}
	if summary["interrupted"] != true || summary["exit_code"] != float64(130) ||
		!strings.HasPrefix(summary["error"].(string), "interrupted: 1 resource(s) finished what they had started (resources.r0); 5 not started") {
		t.Fatalf("summary %v", summary)
	}
	outcomes := map[string]string{}
	for _, r := range summary["resources"].([]any) {
		m := r.(map[string]any)
		outcomes[m["resource"].(string)] = m["outcome"].(string)
	}
	if outcomes["resources.r0"] != "changed" || outcomes["resources.r1"] != "not-run" || outcomes["resources.r5"] != "not-run" {
		t.Fatalf("outcomes %v", outcomes)
	}
	if e.read("r0.txt") != "0" || e.exists("r1.txt") || !strings.Contains(stdout.String(), `"interrupted":true`) {
		t.Fatalf("r0 finished %q, r1 exists %t, stdout %s", e.read("r0.txt"), e.exists("r1.txt"), stdout)
	}
	if r := e.must("state", "show", "resources.r0", "--app", e.app); strings.Contains(r.stdout, "pending") {
		t.Fatalf("r0's finished create left pending:\n%s", r.stdout)
	}

	// A second SIGINT aborts the action under way.
	cmd, lines, _ = e.startJSON("deploy", f, "--yes")
	waitEvent(t, lines, func(ev map[string]any) bool { return phaseOf(ev) == "action" && ev["resource"] == "resources.r1" })
	cmd.Process.Signal(syscall.SIGINT)
	waitEvent(t, lines, func(ev map[string]any) bool { return phaseOf(ev) == "interrupt" })
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	events = drain(lines)
	code = exitCode(t, cmd.Wait())
	took := time.Since(start)
	for _, ev := range events {
		if ev["type"] == "summary" {
			summary = ev
		}
	}
	all := fmt.Sprint(events)
	if code != exitInterrupted || summary["interrupted"] != true || strings.Contains(all, "context canceled") || took > 20*time.Second ||
		summary["error"] != "interrupted and aborted: 1 action(s) cut short (resources.r1): their operations stay pending and the next deploy or destroy resolves them; 4 not started (resources.r2, resources.r3, resources.r4, resources.r5)" {
		t.Fatalf("abort: exit %d after %s, summary %v\n%s", code, took, summary, all)
	}
	if r := e.must("state", "show", "resources.r1", "--app", e.app); !strings.Contains(r.stdout, "pending") {
		t.Fatalf("r1's aborted create not left pending:\n%s", r.stdout)
	}

	r := e.must("deploy", f, "--yes")
	for i := 0; i < 6; i++ {
		if got := e.read(fmt.Sprintf("r%d.txt", i)); got != fmt.Sprint(i) {
			t.Fatalf("r%d.txt = %q after recovery:\n%s%s", i, got, r.stdout, r.stderr)
		}
		if n := strings.Count(e.read(".file-adapter.log"), fmt.Sprintf("create r%d.txt\n", i)); n != 1 {
			t.Fatalf("r%d.txt created %d times:\n%s", i, n, e.read(".file-adapter.log"))
		}
	}
	e.must("destroy", f, "--yes")
}
