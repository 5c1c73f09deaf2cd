package main

import (
	"encoding/json"
	"path/filepath"
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

	// z reads x's sha256. Replacing x, the file adapter plans what the
	// new x will output (protocol RequestExt.Replace), so z is planned
	// with it: unchanged, not a knock-on known after apply.
	var pl struct {
		Steps []struct {
			Resource        string         `json:"resource"`
			Op              string         `json:"op"`
			KnownAfterApply bool           `json:"known_after_apply"`
			Planned         map[string]any `json:"planned"`
		} `json:"steps"`
	}
	r = e.must("plan", f, "--replace", "resources.x", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &pl); err != nil {
		t.Fatalf("plan --json: %v\n%s", err, r.stdout)
	}
	ops := map[string]string{}
	for _, s := range pl.Steps {
		ops[s.Resource] = s.Op
		if s.Resource == "resources.x" && s.Planned["/sha256"] != sha256Hex("x-1") {
			t.Errorf("x planned %v, want its sha256 %s", s.Planned, sha256Hex("x-1"))
		}
		if s.Resource == "resources.z" && s.KnownAfterApply {
			t.Error("z reads only x's planned sha256, yet is known after apply")
		}
	}
	if ops["resources.x"] != "rebuild" || ops["resources.z"] != "noop" || ops["resources.y"] != "noop" {
		t.Fatalf("plan --replace resources.x: %v, want x rebuilt, y and z unchanged\n%s", ops, r.stdout)
	}
	r = e.must("deploy", f, "--replace", "resources.x", "--yes", "--json")
	acted = nil
	for _, ev := range events(t, r.stderr) {
		if ev.Phase == "action" {
			acted = append(acted, ev.Resource+" "+ev.Message)
		}
	}
	if len(acted) != 2 || !strings.HasPrefix(acted[0], "resources.x delete") || !strings.HasPrefix(acted[1], "resources.x create") {
		t.Fatalf("--replace resources.x ran %v, want x deleted then created and nothing else", acted)
	}
	if got, want := e.read("z.txt"), "z reads "+sha256Hex("x-1"); got != want {
		t.Fatalf("z.txt %q, want %q", got, want)
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

// A NAME, --target or --replace that names nothing is refused before the
// Docker Engine or any adapter is asked (DOCKER_HOST points nowhere while
// it is), saying what was typed and the closest name; names only deployed,
// or only in the descriptor, are told apart.
func TestE2EUnknownAddress(t *testing.T) {
	e := newEnv(t)
	const app = `
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  db-service:
    type: IMAGE
    config: {path: db.txt, content: "db"}
  web-service:
    type: IMAGE
    config: {path: web.txt, content: "web reads ${resources.db-service.state.sha256}"}
`
	e.must("deploy", e.write("app.yaml", app+"  old-cache:\n    type: IMAGE\n    config: {path: cache.txt, content: cache}\n"), "--yes")
	f := e.write("app.yaml", app+"  new-queue:\n    type: IMAGE\n    config: {path: queue.txt, content: queue}\n")
	t.Run("refused", func(t *testing.T) {
		t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"deploy", f, "web-servce", "--yes"}, `deploy web-servce: ` + e.app + ` has no resource named web-servce (did you mean "web-service"?); it has: resources.db-service, resources.new-queue, resources.old-cache, resources.web-service`},
			{[]string{"plan", f, "--target", "resources.web-servce"}, `--target resources.web-servce: ` + e.app + ` has no resource at resources.web-servce (did you mean "resources.web-service"?)`},
			{[]string{"deploy", f, "--replace", "db-servic", "--yes"}, `--replace db-servic: ` + e.app + ` has no resource at db-servic (did you mean "db-service"?)`},
			{[]string{"destroy", f, "--target", "old-cahce", "--yes"}, `--target old-cahce: ` + e.app + ` has no deployed resource at old-cahce (did you mean "old-cache"?); deployed: resources.db-service, resources.old-cache, resources.web-service`},
			{[]string{"destroy", f, "new-queue", "--yes"}, `destroy new-queue: new-queue of ` + e.app + ` is not deployed, so there is nothing of it to destroy`},
		} {
			r := e.gc(c.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
				t.Errorf("gcompose %s: exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), r.code, exitUsage, c.want, r.stdout, r.stderr)
			}
		}
	})
	// A name only deployed (old-cache, no longer in the descriptor) is one
	// a deploy may target: it plans old-cache's delete.
	f = e.write("app.yaml", app)
	if r := e.must("plan", f, "old-cache"); !strings.Contains(r.stdout, "resources.old-cache") {
		t.Fatalf("plan old-cache does not show it:\n%s", r.stdout)
	}
	e.must("destroy", f, "--yes")
}
