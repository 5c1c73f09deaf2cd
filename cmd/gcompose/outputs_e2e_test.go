package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// Outputs print after deploy, are in the JSON summary and come back from
// gcompose output; one that reads what a deployed resource does not report
// fails the plan instead of waiting at apply.
func TestE2EOutputs(t *testing.T) {
	e := newEnv(t)
	body := strings.ReplaceAll(pair, "CONTENT", "1") + `
outputs:
  x_sum: ${resources.x.state.sha256}
  where: "file ${resources.y.state.path} of ${app.name}"
`
	// Before anything exists, the file adapter's declared outputs say that
	// x will never report nosuchfield.
	f := e.write("app.yaml", body+"  bad: ${resources.x.state.nosuchfield}\n")
	if p := e.gc("plan", f); p.code == 0 || !strings.Contains(p.stdout+p.stderr, "resources.x will not report nosuchfield: its adapter declares the outputs content, mode, path, sha256, size") {
		t.Fatalf("plan of a fresh app with a bad output: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
	f = e.write("app.yaml", body)
	r := e.must("deploy", f, "--yes")
	if !strings.Contains(r.stdout, "\nOutputs:\n") || !strings.Contains(r.stdout, "where = file y.txt of "+e.app) {
		t.Fatalf("deploy does not print the outputs:\n%s", r.stdout)
	}
	sum := e.must("output", "-f", f, "x_sum").stdout
	if len(strings.TrimSpace(sum)) != 64 {
		t.Fatalf("output x_sum = %q, want a sha256", sum)
	}
	var all map[string]any
	if err := json.Unmarshal([]byte(e.must("output", "-f", f, "--json").stdout), &all); err != nil || all["x_sum"] != strings.TrimSpace(sum) {
		t.Fatalf("output --json: %v %v", all, err)
	}
	r = e.must("deploy", f, "--yes", "--json")
	var summary struct {
		Outputs map[string]any `json:"outputs"`
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &summary); err != nil || summary.Outputs["x_sum"] != strings.TrimSpace(sum) {
		t.Fatalf("JSON summary outputs %v (%v):\n%s", summary.Outputs, err, r.stdout)
	}

	f = e.write("app.yaml", body+"  bad: ${resources.x.state.nosuchfield}\n")
	p := e.gc("plan", f)
	if p.code == 0 || !strings.Contains(p.stdout+p.stderr, "${resources.x.state.nosuchfield}: resources.x reports no such output") {
		t.Fatalf("plan with a bad output: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
}
