package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/file"
	"github.com/gcompose/gcompose/internal/testimage"
)

// Interrupts in the first moments of a deploy, while the descriptor is
// loaded, the adapters are checked and swept and the plan is made: two
// SIGINTs exit 130 with the JSON summary's interrupted true (never "Error:
// context canceled", exit 1), and a first SIGINT when no action is under
// way exits promptly (the checks and sweeps are dropped, not waited for),
// changing nothing.
func TestE2EEarlyInterrupts(t *testing.T) {
	e := newEnv(t)
	// The sweep-capable file adapter: every run sweeps before planning.
	img := testimage.DerivedImage(t, context.Background(), "FROM "+e.image+"\nENV "+file.EnvSweep+"=1\n", fileAdapterName+"-sweep")
	app := func(content string) string {
		return e.write("app.yaml", strings.ReplaceAll(strings.ReplaceAll(dag, "CONTENT", content), e.image, img))
	}
	e.must("deploy", app("1"), "--yes")
	// Each run has work to do (a new content for a, b reading it sleeps
	// 1.5 s), whatever the interrupted runs before it finished.
	runs := 1
	var f string
	run := func(signals ...time.Duration) (code int, summary map[string]any, all string, actions bool, took time.Duration) {
		t.Helper()
		runs++
		f = app(fmt.Sprint(runs))
		cmd, lines, _ := e.startJSON("deploy", f, "--yes")
		begin := time.Now()
		var last time.Time
		for _, at := range signals {
			time.Sleep(time.Until(begin.Add(at)))
			cmd.Process.Signal(syscall.SIGINT)
			last = time.Now()
		}
		events := drain(lines)
		code = exitCode(t, cmd.Wait())
		took = time.Since(last)
		for _, ev := range events {
			if ev["type"] == "summary" {
				summary = ev
			}
			if phaseOf(ev) == "action" {
				actions = true
			}
		}
		return code, summary, fmt.Sprint(events), actions, took
	}
	for _, at := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond} {
		code, summary, all, _, _ := run(at, at+50*time.Millisecond)
		if code != exitInterrupted || summary == nil || summary["interrupted"] != true || strings.Contains(all, "context canceled") {
			t.Fatalf("two SIGINTs at %s: exit %d, summary %v\n%s", at, code, summary, all)
		}
	}
	for _, at := range []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond} {
		// The runs above may have updated a before their interrupt: what
		// counts is that this one changes nothing.
		before := e.read("a.txt")
		code, summary, all, actions, took := run(at)
		if code != exitInterrupted || summary == nil || summary["interrupted"] != true {
			t.Fatalf("a SIGINT at %s: exit %d, summary %v\n%s", at, code, summary, all)
		}
		if actions {
			t.Logf("a SIGINT at %s: an action was under way, exited %s after it", at, took)
			continue
		}
		t.Logf("a SIGINT at %s with no action under way: exited %s after it", at, took)
		// The issue asks for 0.5 s; the bound leaves a loaded machine room
		// (before, 1.5 to 4.8 s).
		if took > 1500*time.Millisecond {
			t.Errorf("a SIGINT at %s with no action under way: exited %s after it, want well under 1.5 s", at, took)
		}
		if got := e.read("a.txt"); got != before {
			t.Fatalf("a SIGINT before any action changed a.txt from %q to %q", before, got)
		}
		if r := e.must("state", "list", "--app", e.app); strings.Contains(r.stdout, "Failed") {
			t.Fatalf("state after an interrupt before any action:\n%s", r.stdout)
		}
	}
	e.must("deploy", f, "--yes")
	if got, want := e.read("a.txt"), fmt.Sprintf("alpha-%d", runs); got != want {
		t.Fatalf("a.txt = %q after the deploy, want %q", got, want)
	}
	e.must("destroy", f, "--yes")
}
