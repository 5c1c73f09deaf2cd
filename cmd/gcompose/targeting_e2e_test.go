package main

import (
	"strings"
	"testing"
)

// deploy NAME touches only that resource and what it needs; --replace
// rebuilds; protect: true refuses a rebuild and a destroy, naming why.
func TestE2ETargetReplaceProtect(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "1"))

	// z reads x's output: deploy z makes x and z, not y.
	e.must("deploy", f, "z", "--yes")
	if !e.exists("x.txt") || !e.exists("z.txt") || e.exists("y.txt") {
		t.Fatalf("deploy z: x %v z %v y %v; want x and z only", e.exists("x.txt"), e.exists("z.txt"), e.exists("y.txt"))
	}
	e.must("deploy", f, "--yes")

	r := e.must("deploy", f, "--replace", "resources.y", "--yes", "--json")
	var acted []string
	for _, ev := range events(t, r.stderr) {
		if ev.Phase == "action" {
			acted = append(acted, ev.Resource+" "+ev.Message)
		}
	}
	if len(acted) != 2 || !strings.HasPrefix(acted[0], "resources.y delete") || !strings.HasPrefix(acted[1], "resources.y create") {
		t.Fatalf("--replace resources.y ran %v, want y deleted then created and nothing else", acted)
	}

	prot := strings.Replace(strings.ReplaceAll(pair, "CONTENT", "1"), "  y:\n    type: IMAGE\n", "  y:\n    type: IMAGE\n    protect: true\n", 1)
	f = e.write("app.yaml", prot)
	e.must("deploy", f, "--yes") // protect alone changes nothing
	f = e.write("app.yaml", strings.Replace(prot, "path: y.txt", "path: y2.txt", 1))
	p := e.gc("plan", f)
	if p.code == 0 || !strings.Contains(p.stdout+p.stderr, "resources.y is protected (protect: true at") || !strings.Contains(p.stdout+p.stderr, "rebuild") {
		t.Fatalf("plan of a protected rebuild: exit %d\n%s%s", p.code, p.stdout, p.stderr)
	}
	f = e.write("app.yaml", prot)
	d := e.gc("destroy", f, "--yes")
	if d.code == 0 || !strings.Contains(d.stdout+d.stderr, "would delete it") || !e.exists("y.txt") {
		t.Fatalf("destroy with protected y: exit %d, y exists %v\n%s%s", d.code, e.exists("y.txt"), d.stdout, d.stderr)
	}
	if e.exists("x.txt") || e.exists("z.txt") {
		t.Fatal("destroy left the unprotected resources")
	}
}

// destroy NAME removes that and what depends on it, dependents first, and
// leaves the rest deployed.
func TestE2EDestroyTarget(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.ReplaceAll(pair, "CONTENT", "1"))
	e.must("deploy", f, "--yes")
	r := e.must("destroy", f, "x", "--yes", "--json")
	var acted []string
	for _, ev := range events(t, r.stderr) {
		if ev.Phase == "action" {
			acted = append(acted, ev.Resource+" "+ev.Message)
		}
	}
	// z reads x's output: it depends on x, so it goes, and first.
	if len(acted) != 2 || !strings.HasPrefix(acted[0], "resources.z delete") || !strings.HasPrefix(acted[1], "resources.x delete") {
		t.Fatalf("destroy x ran %v, want z deleted, then x, and nothing else", acted)
	}
	if e.exists("x.txt") || e.exists("z.txt") || !e.exists("y.txt") {
		t.Fatalf("after destroy x: x %v z %v y %v; want y only", e.exists("x.txt"), e.exists("z.txt"), e.exists("y.txt"))
	}
	if list := e.must("state", "list", "-f", f); strings.Contains(list.stdout, "resources.x") || !strings.Contains(list.stdout, "resources.y") {
		t.Fatalf("state after destroy x:\n%s", list.stdout)
	}
}
