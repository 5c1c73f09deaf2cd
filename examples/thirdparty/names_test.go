package thirdparty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/internal/testimage"
)

// namedName names the image of named-files; testimage adds the content's
// hash to its tag, so that another checkout's run never replaces it.
const namedName = "gcompose-test/named-files:thirdparty"

// namesDescriptor: two plain Deployster resources; the plug is offered by
// resource_names written as in Deployster (the manifest's keys), including
// the docs/descriptor.md example.
const namesDescriptor = `
meta:
  name: APP
plugs:
  out:
    path: ./out
    resource_names: ["^n0", "^db-.*$"]
resources:
  n0:
    type: IMAGE
    config: {content: N0}
  db-files:
    type: IMAGE
    config: {content: db}
`

// TestDeploysterNames deploys a plain adapter that names its files after
// the request's name, as Deployster adapters do, and checks that it
// receives exactly what Deployster sends (testdata/deployster-requests.json),
// and that a resource recorded by an older gcompose under its address
// keeps that name, so nothing is made twice.
func TestDeploysterNames(t *testing.T) {
	testimage.RequireDocker(t)
	namedImage := testimage.Image(t, context.Background(), "./examples/thirdparty/named-files", namedName)
	h := &harness{t: t, bin: gcomposeBinary(t), dir: t.TempDir(), app: "thirdparty-names"}
	left := containersOf(t, h.app)
	if err := os.Mkdir(filepath.Join(h.dir, "out"), 0o777); err != nil {
		t.Fatal(err)
	}
	write := func(n0 string) string {
		body := strings.NewReplacer("APP", h.app, "IMAGE", namedImage, "N0", n0).Replace(namesDescriptor)
		p := filepath.Join(h.dir, "app.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := write("zero")
	r := h.must("deploy", f, "--yes")
	if got := files(t, filepath.Join(h.dir, "out")); !reflect.DeepEqual(got, []string{"db-files.txt", "n0.txt"}) {
		t.Fatalf("files made: %v, want db-files.txt and n0.txt\n%s%s", got, r.stdout, r.stderr)
	}

	// Every request, byte for byte where the name is, and as JSON values
	// against what Deployster sends.
	golden := map[string]any{}
	raw, err := os.ReadFile("testdata/deployster-requests.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.ReplaceAll(raw, []byte("IMAGE"), []byte(namedImage))
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	delete(golden, "//")
	got := map[string]any{}
	reqDir := filepath.Join(h.dir, "out", "requests")
	for _, name := range files(t, reqDir) {
		raw, err := os.ReadFile(filepath.Join(reqDir, name))
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(name, ".") // <name>.<call>.<n>.json
		res, call := parts[0], parts[1]
		if !bytes.Contains(raw, []byte(`"name":"`+res+`"`)) {
			t.Errorf("%s: the request does not carry \"name\":%q byte for byte:\n%s", name, res, raw)
		}
		var req map[string]any
		if err := json.Unmarshal(raw, &req); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, k := range []string{"version", "workspace"} {
			if _, ok := req[k].(string); !ok {
				t.Errorf("%s: %s is %v, want a string", name, k, req[k])
			}
			req[k] = "<" + k + ">"
		}
		key := res + " " + call
		if prev, ok := got[key]; ok && !reflect.DeepEqual(prev, req) {
			t.Errorf("%s: two %s requests differ: %v and %v", name, key, prev, req)
		}
		got[key] = req
	}
	if !reflect.DeepEqual(got, golden) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(golden, "", "  ")
		t.Fatalf("requests differ from Deployster's:\ngcompose sent\n%s\nDeployster sends\n%s", g, w)
	}
	show := h.must("state", "show", "resources.n0", "--app", h.app)
	if !strings.Contains(show.stdout, `"adapter_name": "n0"`) {
		t.Fatalf("state show does not record the adapter's name:\n%s", show.stdout)
	}

	// A state written by an older gcompose: n0 recorded without a name,
	// its adapter having made resources.n0.txt. It keeps that name: no
	// second file, nothing to do, and an update writes the old file.
	pulled := filepath.Join(h.dir, "state.json")
	p := h.must("state", "pull", "--app", h.app)
	var doc map[string]any
	if err := json.Unmarshal([]byte(p.stdout), &doc); err != nil {
		t.Fatalf("state pull: %v\n%s", err, p.stdout)
	}
	n0 := doc["resources"].(map[string]any)["resources.n0"].(map[string]any)
	delete(n0, "adapter_name")
	old, _ := json.Marshal(doc)
	if err := os.WriteFile(pulled, old, 0o644); err != nil {
		t.Fatal(err)
	}
	h.must("state", "push", pulled, "--app", h.app, "--force")
	if err := os.Rename(filepath.Join(h.dir, "out", "n0.txt"), filepath.Join(h.dir, "out", "resources.n0.txt")); err != nil {
		t.Fatal(err)
	}
	if r := h.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") {
		t.Fatalf("an old state's resource was not found under its old name:\n%s%s", r.stdout, r.stderr)
	}
	f = write("one")
	r = h.must("deploy", f, "--yes")
	content, err := os.ReadFile(filepath.Join(h.dir, "out", "resources.n0.txt"))
	if err != nil || string(content) != "one" || h.exists("out/n0.txt") {
		t.Fatalf("update of an old state's resource: resources.n0.txt %q (%v), n0.txt made: %v\n%s%s", content, err, h.exists("out/n0.txt"), r.stdout, r.stderr)
	}
	if ids := left(); len(ids) > 0 {
		t.Fatalf("containers of %s left behind: %v", h.app, ids)
	}
}

// files lists the regular files of dir, sorted.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}
