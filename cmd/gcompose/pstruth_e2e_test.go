package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// ps and state tell the truth about a resource whose last step failed:
// never Active as before, but Failed with the failed step and why.
func TestE2EPsShowsAFailedStep(t *testing.T) {
	e := newEnv(t)
	body := `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  x:
    type: IMAGE
    config: {path: x.txt, content: "CONTENT"FAIL}
`
	write := func(content, fail string) string {
		return e.write("app.yaml", strings.ReplaceAll(strings.ReplaceAll(body, "CONTENT", content), "FAIL", fail))
	}
	e.must("deploy", write("1", ""), "--yes")
	if r := e.must("ps", "--app", e.app); !strings.Contains(r.stdout, "Active") {
		t.Fatalf("ps after a good deploy:\n%s", r.stdout)
	}
	if r := e.gc("deploy", write("2", `, fail: "disk full"`), "--yes"); r.code != exitError {
		t.Fatalf("deploy with a failing action: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ps := e.must("ps", "--app", e.app)
	if strings.Contains(ps.stdout, "Active") || !strings.Contains(ps.stdout, "Failed (update failed: action update: ") || !strings.Contains(ps.stdout, "failing on demand: disk full") {
		t.Fatalf("ps after a failed update:\n%s", ps.stdout)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(e.must("ps", "--app", e.app, "--json").stdout), &rows); err != nil || len(rows) != 1 ||
		rows[0]["status"] != "Failed" || !strings.Contains(rows[0]["failed"].(string), "disk full") {
		t.Fatalf("ps --json: %v %v", err, rows)
	}
	if st := e.statusOf("resources.x"); st != "Failed" {
		t.Fatalf("state list: %q, want Failed", st)
	}
	show := e.must("state", "show", "resources.x", "--app", e.app)
	if !strings.Contains(show.stdout, `"status": "Failed"`) || !strings.Contains(show.stdout, "disk full") {
		t.Fatalf("state show:\n%s", show.stdout)
	}
	// Fixed, it is Active again.
	e.must("deploy", write("2", ""), "--yes")
	if st := e.statusOf("resources.x"); st != "Active" {
		t.Fatalf("after the fix: %q", st)
	}
	e.must("destroy", write("2", ""), "--yes")
}
