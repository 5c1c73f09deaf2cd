package plan

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gcompose/gcompose/protocol"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestRender(t *testing.T) {
	p := &Plan{Mode: Deploy, Steps: []*Step{
		{Resource: "resources.new", Op: Create, Reason: "does not exist", After: map[string]any{"path": "a.txt", "n": 1.0}},
		{Resource: "resources.knock", Op: Update, KnownAfterApply: true, Reason: "knock-on: inputs known after apply: ${resources.new.state.sha256}",
			Before: map[string]any{"sum": "abc"}, After: map[string]any{"sum": "${resources.new.state.sha256}"}},
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
	p.Render(&b, false)
	golden(t, "render.golden", b.Bytes())

	b.Reset()
	(&Plan{Mode: Deploy, Steps: []*Step{{Resource: "resources.same", Op: NoOp}}}).finishAndRender(&b)
	golden(t, "render-nochange.golden", b.Bytes())
}

func (p *Plan) finishAndRender(b *bytes.Buffer) { p.finish(); p.Render(b, false) }

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
