package progress

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

// clock is a fake time source the tests move by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time                { return c.t }
func (c *clock) add(d time.Duration) time.Time { c.t = c.t.Add(d); return c.t }

var t0 = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func testPlan() *plan.Plan {
	return &plan.Plan{FormatVersion: 1, App: "shop", Mode: plan.Deploy, Steps: []*plan.Step{
		{Resource: "resources.a", Type: "file", Op: plan.Create},
		{Resource: "resources.b", Type: "file", Op: plan.Update},
		{Resource: "resources.c", Type: "file", Op: plan.Create},
		{Resource: "resources.d", Type: "file", Op: plan.NoOp},
	}, Summary: plan.Summary{Create: 2, Update: 1, Unchanged: 1}}
}

// script feeds a run to a renderer: a slow create with heartbeats, an update
// with adapter output, a failure and a skip.
func script(r *Renderer, c *clock) {
	r.SetPlan(testPlan())
	r.Observe(apply.Event{Time: c.add(0), Resource: "resources.a", Phase: apply.PhaseState})
	r.Observe(apply.Event{Time: c.add(100 * time.Millisecond), Resource: "resources.a", Phase: apply.PhaseAction, Message: "create: write a.txt"})
	for i := 0; i < 25; i++ {
		c.add(time.Second)
		r.Tick()
	}
	r.Observe(apply.Event{Time: c.add(0), Resource: "resources.a", Phase: apply.PhaseActionDone, Message: "create: write a.txt", Duration: 25 * time.Second, Output: "wrote 5 bytes\n"})
	r.Observe(apply.Event{Time: c.add(10 * time.Millisecond), Resource: "resources.a", Phase: apply.PhaseVerify})
	r.Observe(apply.Event{Time: c.add(10 * time.Millisecond), Resource: "resources.a", Phase: apply.PhaseDone, Message: "create", Duration: 25200 * time.Millisecond})
	r.Observe(apply.Event{Time: c.add(10 * time.Millisecond), Resource: "resources.b", Phase: apply.PhaseWait, Message: "waiting for ${resources.a.state.sha256}"})
	r.Observe(apply.Event{Time: c.add(10 * time.Millisecond), Resource: "resources.b", Phase: apply.PhaseAction, Message: "update"})
	r.Observe(apply.Event{Time: c.add(2 * time.Second), Resource: "resources.b", Phase: apply.PhaseFailed, Message: "action update: exit 1", Duration: 2 * time.Second})
	r.Observe(apply.Event{Time: c.add(0), Resource: "resources.c", Phase: apply.PhaseSkipped, Message: "skipped because resources.b failed"})
	r.Note(Warn, "took over the lock of host:1 for deploy")
}

func render(t *testing.T, mode Mode, color bool) (string, *Renderer) {
	return renderLive(t, mode, color, false)
}

func renderLive(t *testing.T, mode Mode, color, live bool) (string, *Renderer) {
	t.Helper()
	var buf bytes.Buffer
	c := &clock{t: t0}
	r := New(&buf, Options{Mode: mode, Color: color, Heartbeat: 10 * time.Second, Now: c.now, Live: live})
	// Tick by hand: stop the background ticker so output is deterministic.
	r.Close()
	script(r, c)
	return buf.String(), r
}

func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  Mode
		color bool
		live  bool
	}{
		{"plain.golden", Plain, false, false},
		{"tty.golden", TTY, false, false},
		{"tty-color.golden", TTY, true, false},
		{"quiet.golden", Quiet, false, false},
		{"tty-live.golden", TTY, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := renderLive(t, tc.mode, tc.color, tc.live)
			golden.CheckString(t, filepath.Join("testdata", tc.name), got)
		})
	}
}

func TestHeartbeat(t *testing.T) {
	got, _ := render(t, Plain, false)
	for _, want := range []string{"resources.a: still creating... 10s\n", "resources.a: still creating... 20s\n"} {
		if strings.Count(got, want) != 1 {
			t.Errorf("want exactly one %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "30s") {
		t.Errorf("heartbeat after the action ended:\n%s", got)
	}
}

func TestNoColorWithoutTTY(t *testing.T) {
	for _, m := range []Mode{Plain, JSON} {
		got, _ := render(t, m, true)
		if strings.Contains(got, "\x1b[") {
			t.Errorf("%s output has escape codes:\n%s", m, got)
		}
	}
	if ColorAllowed(func(string) string { return "1" }) {
		t.Error("NO_COLOR=1 allows color")
	}
	if !ColorAllowed(func(string) string { return "" }) {
		t.Error("color refused without NO_COLOR")
	}
}

func TestJSONLinesMatchSchema(t *testing.T) {
	got, r := render(t, JSON, false)
	res := &apply.Result{Outcomes: map[string]*apply.Outcome{
		"resources.a": {Resource: "resources.a", Op: plan.Create, Changed: true, Duration: 25 * time.Second},
		"resources.b": {Resource: "resources.b", Op: plan.Update, Err: errors.New("action update: exit 1")},
		"resources.c": {Resource: "resources.c", Op: plan.Create, Err: errors.New("skipped because resources.b failed")},
	}}
	s := r.Summarize("deploy", "shop", testPlan(), res, true, 27*time.Second, errors.New("1 resource failed"), 1)
	var buf bytes.Buffer
	r.w = &buf
	r.WriteSummary(s)
	got += buf.String()

	sc := bufio.NewScanner(strings.NewReader(got))
	n := 0
	var last string
	for sc.Scan() {
		n++
		last = sc.Text()
		if err := ValidateLine(sc.Bytes()); err != nil {
			t.Errorf("line %d does not match the schema: %v\n%s", n, err, sc.Text())
		}
	}
	if n < 10 {
		t.Fatalf("%d lines:\n%s", n, got)
	}
	if !strings.Contains(last, `"type":"summary"`) {
		t.Fatalf("last line is not the summary: %s", last)
	}
	want := Counts{Create: 2, Update: 1, Unchanged: 1, Changed: 1, Failed: 1, Skipped: 1}
	if s.Counts != want || s.OK || s.ExitCode != 1 {
		t.Errorf("summary counts %+v ok %v exit %d, want %+v false 1", s.Counts, s.OK, s.ExitCode, want)
	}
	outcomes := map[string]string{}
	for _, ro := range s.Resources {
		outcomes[ro.Resource] = ro.Outcome
	}
	wantO := map[string]string{"resources.a": "changed", "resources.b": "failed", "resources.c": "skipped", "resources.d": "unchanged"}
	for k, v := range wantO {
		if outcomes[k] != v {
			t.Errorf("%s: outcome %q, want %q", k, outcomes[k], v)
		}
	}
	if !strings.Contains(got, `"output":"wrote 5 bytes\n"`) || !strings.Contains(got, `"level":"error"`) {
		t.Errorf("output or level missing:\n%s", got)
	}
}

func TestSchemaRejects(t *testing.T) {
	for _, line := range []string{
		`{"type":"event","time":"2026-11-22T04:00:00Z","level":"info","phase":"done"}`,       // no v
		`{"v":2,"type":"event","time":"2026-11-22T04:00:00Z","level":"info","phase":"done"}`, // wrong version
		`{"v":1,"type":"event","time":"yesterday","level":"info","phase":"done"}`,            // bad time
		`{"v":1,"type":"summary","time":"2026-11-22T04:00:00Z","command":"deploy"}`,          // incomplete
	} {
		if ValidateLine([]byte(line)) == nil {
			t.Errorf("schema accepts %s", line)
		}
	}
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"tty", "plain", "json", "quiet"} {
		if m, err := ParseMode(s); err != nil || string(m) != s {
			t.Errorf("ParseMode(%q) = %q, %v", s, m, err)
		}
	}
	if _, err := ParseMode("fancy"); err == nil {
		t.Error("ParseMode accepts fancy")
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}

// TestBackgroundHeartbeat runs the real ticker with a short interval.
func TestBackgroundHeartbeat(t *testing.T) {
	var buf syncwriter.Buffer
	r := New(&buf, Options{Mode: Plain, Heartbeat: 50 * time.Millisecond})
	r.Observe(apply.Event{Resource: "resources.x", Phase: apply.PhaseAction, Message: "create"})
	// On a loaded machine the first tick may come late, and then reports a
	// later multiple of the interval: wait for a beat (up to 10 s), and accept
	// any multiple of 50ms.
	beat := regexp.MustCompile(`resources\.x: still working\.\.\. [0-9.]+m?s\n`)
	for deadline := time.Now().Add(10 * time.Second); !beat.MatchString(buf.String()) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.Observe(apply.Event{Resource: "resources.x", Phase: apply.PhaseActionDone, Message: "create"})
	r.Close()
	m := beat.FindString(buf.String())
	if m == "" {
		t.Fatalf("no heartbeat within 10s:\n%s", buf.String())
	}
	el, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(m, "resources.x: still working... ")))
	if err != nil || el < 50*time.Millisecond || el%(50*time.Millisecond) != 0 {
		t.Fatalf("heartbeat %q: want a multiple of the 50ms interval (%v)", m, err)
	}
}

func TestLiveStatusLine(t *testing.T) {
	got, r := renderLive(t, TTY, false, true)
	if !strings.Contains(got, "1 running: resources.a creating 5.0s") || !strings.Contains(got, "\r\x1b[K") {
		t.Errorf("no live status line:\n%q", got)
	}
	// Nothing is running at the end: the line is erased, not left behind.
	r.Close()
	if strings.HasSuffix(strings.TrimRight(got, "\n"), "running") {
		t.Errorf("status line left at the end:\n%q", got)
	}
	plain, _ := renderLive(t, Plain, false, true)
	if strings.Contains(plain, "running:") {
		t.Errorf("live status line in plain mode:\n%s", plain)
	}
}

// TestJSONKeepsTextAsTyped: the JSON stream and summary carry commands and
// messages as they are, not HTML-escaped ("\u003e" for ">" in a shell
// command is unreadable in a CI log and breaks a grep).
func TestJSONKeepsTextAsTyped(t *testing.T) {
	var buf bytes.Buffer
	c := &clock{t: t0}
	r := New(&buf, Options{Mode: JSON, Now: c.now})
	r.Close()
	r.SetPlan(testPlan())
	const cmd = `init[1] /bin/sh -c "run > /tmp/out 2> /tmp/err &" <x>`
	r.Observe(apply.Event{Time: c.add(0), Resource: "resources.a", Phase: apply.PhaseActionDone, Message: cmd, Output: "a & b\n"})
	res := &apply.Result{Outcomes: map[string]*apply.Outcome{"resources.a": {Resource: "resources.a", Op: plan.Create, Err: errors.New("exit 1 > 0 & failed")}}}
	r.WriteSummary(r.Summarize("deploy", "shop", testPlan(), res, true, time.Second, errors.New("a < b"), 1))
	got := buf.String()
	for _, want := range []string{`run > /tmp/out 2> /tmp/err &`, `<x>`, `a & b\n`, `exit 1 > 0 & failed`} {
		if !strings.Contains(got, want) {
			t.Errorf("the JSON lack %q as typed:\n%s", want, got)
		}
	}
	if strings.Contains(got, `\u00`) {
		t.Errorf("HTML-escaped JSON:\n%s", got)
	}
}
