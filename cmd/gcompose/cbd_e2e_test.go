package main

import (
	"strings"
	"testing"
)

// create_before_destroy: true on a file resource whose path changes: plan
// shows +/- (the file adapter declares it can), and the deploy writes the
// new file before it deletes the old one (the adapter's journal); without
// the option the same change is -/+, the old file deleted first.
func TestE2ECreateBeforeDestroy(t *testing.T) {
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
    CBD
    config: {path: PATH, content: "x", journal: journal.log}
`
	write := func(path string, cbd bool) string {
		opt := ""
		if cbd {
			opt = "create_before_destroy: true"
		}
		return e.write("app.yaml", strings.NewReplacer("PATH", path, "CBD", opt).Replace(body))
	}
	e.must("deploy", write("a.txt", true), "--yes")
	f := write("b.txt", true)
	if p := e.must("plan", f); !strings.Contains(p.stdout, "+/- rebuild   resources.x") {
		t.Fatalf("plan with create_before_destroy:\n%s", p.stdout)
	}
	e.must("deploy", f, "--yes")
	if e.exists("a.txt") || e.read("b.txt") != "x" {
		t.Fatalf("after the rebuild: a.txt exists %v, b.txt %q", e.exists("a.txt"), e.read("b.txt"))
	}
	if j := e.read("journal.log"); !strings.HasSuffix(j, "create b.txt\nremove-old a.txt\n") {
		t.Fatalf("journal:\n%s\nwant b.txt created before a.txt is deleted", j)
	}
	f = write("c.txt", false)
	if p := e.must("plan", f); !strings.Contains(p.stdout, "-/+ rebuild   resources.x") {
		t.Fatalf("plan without create_before_destroy:\n%s", p.stdout)
	}
	e.must("deploy", f, "--yes")
	if j := e.read("journal.log"); !strings.HasSuffix(j, "remove-old b.txt\ncreate c.txt\n") {
		t.Fatalf("journal:\n%s\nwant b.txt deleted before c.txt is created", j)
	}
	e.must("destroy", f, "--yes")
}
