package thirdparty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/internal/testimage"
)

const (
	kvName      = "gcompose-test/kv-deployster:thirdparty"
	counterName = "gcompose-test/counter:thirdparty"
)

// descriptor: greeting is a plain Deployster resource; hits reads its state
// (and names it as a dependency); total is independent, and total-id, plain
// Deployster again, records total's id, known only once total is applied:
// a plain adapter consuming a gcompose adapter's output.
const descriptor = `
meta:
  name: APP
plugs:
  kv:
    path: ./kv
  counters:
    path: ./counters
resources:
  greeting:
    type: KV
    config: {file: settings.json, key: greeting, value: GREETING}
  hits:
    type: COUNTER
    dependencies: {settings: greeting}
    config: {file: hits.count, value: HITS, label: "${resources.greeting.state.value}"}
  total:
    type: COUNTER
    config: {file: TOTALFILE, value: 10}
  total-id:
    type: KV
    config: {file: ids.json, key: total, value: "${resources.total.state.id}"}
`

type harness struct {
	t        *testing.T
	bin, dir string
	app      string
	// kv and counter are the adapter images' references.
	kv, counter string
}

func (h *harness) write(greeting, hits, totalFile string) string {
	h.t.Helper()
	body := strings.NewReplacer("APP", h.app, "KV", h.kv, "COUNTER", h.counter,
		"GREETING", greeting, "HITS", hits, "TOTALFILE", totalFile).Replace(descriptor)
	p := filepath.Join(h.dir, "app.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return p
}

type result struct {
	code           int
	stdout, stderr string
}

func (h *harness) gc(args ...string) result {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.bin, append(args, "--state", filepath.Join(h.dir, "state"))...)
	cmd.Dir = h.dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("run gcompose %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

func (h *harness) must(args ...string) result {
	h.t.Helper()
	r := h.gc(args...)
	if r.code != 0 {
		h.t.Fatalf("gcompose %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func (h *harness) readJSON(rel string, v any) {
	h.t.Helper()
	raw, err := os.ReadFile(filepath.Join(h.dir, rel))
	if err != nil {
		h.t.Fatalf("read %s: %v", rel, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		h.t.Fatalf("%s: %v\n%s", rel, err, raw)
	}
}

func (h *harness) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(h.dir, rel))
	return err == nil
}

type counterFile struct {
	ID    string `json:"id"`
	App   string `json:"app"`
	Value int    `json:"value"`
	Label string `json:"label"`
}

// gcomposeBinary is the CLI, built once per test binary run: its run
// function is in package main.
func gcomposeBinary(t *testing.T) string {
	t.Helper()
	return testimage.Binary(t, context.Background(), "./cmd/gcompose")
}

// containersOf lists the containers gcompose made for app, and removes
// whatever is left when the test ends.
func containersOf(t *testing.T, app string) func() []string {
	t.Cleanup(func() {
		cli := testimage.Client(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "gcompose.app="+app))})
		if err != nil {
			return
		}
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	})
	return func() []string {
		return testimage.ContainersLabelled(t, context.Background(), "gcompose.app", app)
	}
}

func TestThirdPartyAdaptersEndToEnd(t *testing.T) {
	testimage.RequireDocker(t)
	ctx := context.Background()
	h := &harness{t: t, bin: gcomposeBinary(t), dir: t.TempDir(), app: "thirdparty-e2e",
		kv: testimage.Image(t, ctx, "./examples/thirdparty/kv-deployster", kvName), counter: testimage.Image(t, ctx, "./examples/thirdparty/counter", counterName)}
	left := containersOf(t, h.app)
	for _, d := range []string{"kv", "counters"} {
		if err := os.Mkdir(filepath.Join(h.dir, d), 0o777); err != nil {
			t.Fatal(err)
		}
	}

	// First deploy: everything is created, hits after greeting, reading its value.
	f := h.write("hello", "1", "total.count")
	if p := h.gc("plan", f, "--detailed-exitcode"); p.code != 2 || !strings.Contains(p.stdout, "Plan: 4 to create") ||
		!strings.Contains(p.stdout, "(known after apply: ${resources.total.state.id})") {
		t.Fatalf("plan: exit %d, want 2 and 4 creates, total-id's value known after apply\n%s%s", p.code, p.stdout, p.stderr)
	}
	r := h.must("deploy", f, "--yes")
	var kv map[string]string
	h.readJSON("kv/settings.json", &kv)
	if kv["greeting"] != "hello" {
		t.Fatalf("settings.json = %v", kv)
	}
	var ids map[string]string
	var hits, total counterFile
	h.readJSON("counters/hits.count", &hits)
	h.readJSON("counters/total.count", &total)
	if hits.Value != 1 || hits.Label != "hello" || hits.App != h.app || hits.ID == "" || total.Value != 10 {
		t.Fatalf("after deploy: hits %+v total %+v\n%s%s", hits, total, r.stdout, r.stderr)
	}
	if h.readJSON("kv/ids.json", &ids); ids["total"] != total.ID {
		t.Fatalf("ids.json = %v, want total's id %s", ids, total.ID)
	}
	ls := h.must("state", "list", "--app", h.app)
	for _, name := range []string{"resources.greeting", "resources.hits", "resources.total", "resources.total-id"} {
		if !regexp.MustCompile(regexp.QuoteMeta(name) + `\s+Active`).MatchString(ls.stdout) {
			t.Fatalf("state list: %s is not Active:\n%s", name, ls.stdout)
		}
	}
	// The identity line of the create action was persisted.
	show := h.must("state", "show", "resources.hits", "--app", h.app)
	if !strings.Contains(show.stdout, `"id": "`+hits.ID+`"`) {
		t.Fatalf("state show lacks the identity %s:\n%s", hits.ID, show.stdout)
	}

	// Re-deploy: nothing to do, no action runs.
	r = h.must("deploy", f, "--yes")
	if !strings.Contains(r.stdout, "Nothing to do") || strings.Contains(r.stderr, " action ") {
		t.Fatalf("re-deploy was not a no-op:\n%s%s", r.stdout, r.stderr)
	}

	// A config change: greeting and hits are updated in place (hits also by
	// knock-on), total is rebuilt because its file changed, and total-id
	// follows it by knock-on.
	f = h.write("hi", "2", "sum.count")
	p := h.gc("plan", f)
	for _, want := range []string{"~ update    resources.greeting", "~ update    resources.hits",
		"-/+ rebuild   resources.total", "forced by /file", "~ update    resources.total-id"} {
		if !strings.Contains(p.stdout, want) {
			t.Fatalf("plan after change lacks %q:\n%s%s", want, p.stdout, p.stderr)
		}
	}
	r = h.must("deploy", f, "--yes")
	h.readJSON("kv/settings.json", &kv)
	var hits2, sum counterFile
	h.readJSON("counters/hits.count", &hits2)
	h.readJSON("counters/sum.count", &sum)
	if kv["greeting"] != "hi" || hits2.Value != 2 || hits2.Label != "hi" || hits2.ID != hits.ID {
		t.Fatalf("after update: settings %v, hits %+v (was %+v)\n%s%s", kv, hits2, hits, r.stdout, r.stderr)
	}
	if h.exists("counters/total.count") || sum.Value != 10 || sum.ID == total.ID {
		t.Fatalf("total not rebuilt: old file there %v, new %+v (old %+v)", h.exists("counters/total.count"), sum, total)
	}
	if h.readJSON("kv/ids.json", &ids); ids["total"] != sum.ID {
		t.Fatalf("ids.json = %v, want the rebuilt total's id %s", ids, sum.ID)
	}
	if r := h.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") {
		t.Fatalf("not converged after the change:\n%s%s", r.stdout, r.stderr)
	}

	// Destroy: the counters are removed; the plain Deployster entries cannot
	// be, so they are forgotten with a note and stay on disk.
	r = h.must("destroy", f, "--yes")
	if !strings.Contains(r.stdout, "x forget    resources.greeting") || !strings.Contains(r.stdout, "x forget    resources.total-id") ||
		!strings.Contains(r.stdout, "cannot destroy") {
		t.Fatalf("destroy does not say greeting is forgotten:\n%s%s", r.stdout, r.stderr)
	}
	if h.exists("counters/hits.count") || h.exists("counters/sum.count") {
		t.Fatalf("counters survived destroy:\n%s%s", r.stdout, r.stderr)
	}
	h.readJSON("kv/settings.json", &kv)
	if kv["greeting"] != "hi" {
		t.Fatalf("the forgotten entry changed: %v", kv)
	}
	if ls := h.must("state", "list", "--app", h.app); strings.Contains(ls.stdout, "resources.") {
		t.Fatalf("state not empty after destroy:\n%s", ls.stdout)
	}
	if ids := left(); len(ids) > 0 {
		t.Fatalf("containers of %s left behind: %v", h.app, ids)
	}
}
