package plan

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/protocol"
)

func TestRender(t *testing.T) {
	p := &Plan{Mode: Deploy, Steps: []*Step{
		{Resource: "resources.new", Op: Create, Reason: "does not exist", After: map[string]any{"path": "a.txt", "n": 1.0}},
		{Resource: "resources.knock", Op: Update, KnownAfterApply: true, Reason: "knock-on: inputs known after apply: ${resources.new.state.sha256}",
			Before: map[string]any{"sum": "abc"}, After: map[string]any{"sum": "${resources.new.state.sha256}", "line": "${resources.new.state.sha256}  a.txt\n"}},
		{Resource: "services.web", Op: Rebuild, Reason: "changed: /init", Forces: []string{"/init"},
			Before: map[string]any{"init": []any{map[string]any{"run": map[string]any{"args": []any{"a"}}}}},
			After:  map[string]any{"init": []any{map[string]any{"run": map[string]any{"args": []any{"a", "b"}}}, "x"}}},
		{Resource: "resources.old", Op: Delete, Reason: "gone from the descriptor", Before: map[string]any{"path": "old.txt"},
			Actions: []protocol.ActionSpec{{Name: "delete"}}},
		{Resource: "resources.plain", Op: Forget, Reason: "adapter speaks plain Deployster and cannot destroy: forgotten, not removed"},
		{Resource: "resources.broken", Op: Failed, Error: "resources.broken: state call: answer is not JSON"},
		{Resource: "resources.same", Op: NoOp},
	}}
	p.finish()
	var b bytes.Buffer
	p.Render(&b, RenderOptions{})
	golden.Check(t, "testdata/render.golden", b.Bytes())

	b.Reset()
	(&Plan{Mode: Deploy, Steps: []*Step{{Resource: "resources.same", Op: NoOp}}}).finishAndRender(&b, RenderOptions{})
	golden.Check(t, "testdata/render-nochange.golden", b.Bytes())

	// refresh: what drifted says so, the rest is not listed.
	b.Reset()
	(&Plan{Mode: Refresh, Steps: []*Step{{Resource: "services.db", Op: NoOp, Drift: "stale", Reason: "the activity is Terminated"},
		{Resource: "services.web", Op: NoOp}}}).finishAndRender(&b, RenderOptions{})
	golden.Check(t, "testdata/render-refresh.golden", b.Bytes())
}

// A plan whose only news is a failure must not read as "No changes".
func TestRenderFailedIsNotNoChanges(t *testing.T) {
	var b bytes.Buffer
	(&Plan{Mode: Deploy, Steps: []*Step{
		{Resource: "resources.config", Op: Failed, Error: "resources.config: plug \"files\": directory /x does not exist"},
		{Resource: "resources.same", Op: NoOp},
	}}).finishAndRender(&b, RenderOptions{})
	golden.Check(t, "testdata/render-failed.golden", b.Bytes())
}

// Values are shown as typed (no \u003e for ">") and whole: wrapped at the
// terminal's width, on one line without one.
func TestRenderLongValues(t *testing.T) {
	long := map[string]any{"args": []any{"/bin/sh", "-c", "/devnet-web --db-address 192.168.77.2 --db-port 4001 run > /tmp/web.out 2> /tmp/web.err && echo ok"}}
	for _, tc := range []struct {
		name  string
		width int
	}{{"render-long-nowrap.golden", 0}, {"render-long-wrap60.golden", 60}} {
		var b bytes.Buffer
		(&Plan{Mode: Deploy, Steps: []*Step{
			{Resource: "services.web", Op: Create, After: map[string]any{"init": []any{map[string]any{"run": long}}}},
		}}).finishAndRender(&b, RenderOptions{Width: tc.width})
		golden.Check(t, filepath.Join("testdata", tc.name), b.Bytes())
		for _, l := range bytes.Split(b.Bytes(), []byte("\n")) {
			if tc.width > 0 && len([]rune(string(l))) > tc.width {
				t.Errorf("%s: line longer than %d: %q", tc.name, tc.width, l)
			}
		}
		for _, bad := range []string{`\u003e`, `\u0026`, "..."} {
			if bytes.Contains(b.Bytes(), []byte(bad)) {
				t.Errorf("%s: %q in\n%s", tc.name, bad, b.Bytes())
			}
		}
		joined := string(b.Bytes())
		if tc.width > 0 {
			joined = strings.ReplaceAll(joined, "\n"+strings.Repeat(" ", 16), "")
		}
		if !strings.Contains(joined, "2> /tmp/web.err && echo ok") {
			t.Errorf("%s: value cut:\n%s", tc.name, b.Bytes())
		}
	}
}

func (p *Plan) finishAndRender(b *bytes.Buffer, opt RenderOptions) { p.finish(); p.Render(b, opt) }

// TestRenderCost: each step's cost under its line, and the plan's total by
// currency, of what stays present (a deleted resource costs nothing).
func TestRenderCost(t *testing.T) {
	p := &Plan{Mode: Deploy, Steps: []*Step{
		{Resource: "services.db", Op: Create, KnownAfterApply: true, Cost: &protocol.Cost{Currency: "EUR", PerHour: 0.144, Hours: 3, Total: 0.432, Basis: protocol.CostMarket, Note: "cheapest of 2 offer(s) within the caps in subnet public: cheap (0xc)"}},
		{Resource: "services.web", Op: NoOp, Cost: &protocol.Cost{Currency: "EUR", PerHour: 0.36, Start: 0.1, Hours: 3, Total: 1.18, Basis: protocol.CostAgreed}},
		{Resource: "services.api", Op: Create, Cost: &protocol.Cost{Currency: "EUR", PerHour: 1.5, Start: 0.5, Hours: 3, Total: 5, Basis: protocol.CostCaps, Note: "the most the caps allow; no offer on the market now"}},
		{Resource: "services.old", Op: Delete, Cost: &protocol.Cost{Currency: "EUR", PerHour: 9, Total: 9, Basis: protocol.CostAgreed}},
	}}
	p.finish()
	if len(p.Cost) != 1 || p.Cost[0].Resources != 3 || p.Cost[0].PerHour != 0.144+0.36+1.5 || p.Cost[0].Total != 0.432+1.18+5 {
		t.Fatalf("plan cost %+v", p.Cost)
	}
	var b bytes.Buffer
	p.Render(&b, RenderOptions{ShowUnchanged: true})
	golden.Check(t, "testdata/render-cost.golden", b.Bytes())
}

// A rebuild whose adapter creates the replacement first
// (create_before_destroy) is shown +/-, another -/+.
func TestCreateBeforeDestroyRebuildIsShownPlusMinus(t *testing.T) {
	pl := &Plan{Mode: Deploy, Steps: []*Step{
		{Resource: "resources.a", Op: Rebuild, CreateBeforeDestroy: true, Reason: "path changed"},
		{Resource: "resources.b", Op: Rebuild, Reason: "path changed"},
	}}
	var b strings.Builder
	pl.Render(&b, RenderOptions{})
	if !strings.Contains(b.String(), "+/- rebuild   resources.a") || !strings.Contains(b.String(), "-/+ rebuild   resources.b") {
		t.Fatalf("render:\n%s", b.String())
	}
}
