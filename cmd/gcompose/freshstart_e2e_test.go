package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/internal/testimage"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// twoFiles is an app of two files; VALUE changes between deploys.
const twoFiles = `meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  a: {type: IMAGE, config: {path: a.txt, content: "VALUE", journal: adapter.log}}
  b: {type: IMAGE, dependencies: {prev: a}, config: {path: b.txt, content: "b", journal: adapter.log}}
`

func (e *env) creates() int { return strings.Count(e.read("adapter.log"), "create ") }

// A state directory that lost its document (the journals and backup still
// there) or whose document was damaged: every command refuses to start from
// nothing, state recover rebuilds it, and the next deploy has nothing to do
// (nothing was created twice). --force-new-state starts a new lineage.
func TestE2ENoSilentFreshStartFile(t *testing.T) {
	e := newEnv(t)
	f := e.write("app.yaml", strings.Replace(twoFiles, "VALUE", "one", 1))
	e.must("deploy", f, "--yes")
	e.write("app.yaml", strings.Replace(twoFiles, "VALUE", "two", 1))
	e.must("deploy", f, "--yes")
	if e.creates() != 2 {
		t.Fatalf("adapter log:\n%s", e.read("adapter.log"))
	}
	doc := filepath.Join(e.state, e.app+".json")
	lineage := func() string {
		b, _ := os.ReadFile(doc)
		_, rest, _ := strings.Cut(string(b), `"lineage": "`)
		l, _, _ := strings.Cut(rest, `"`)
		return l
	}
	was := lineage()

	// 1. APP.json deleted.
	os.Remove(doc)
	for _, args := range [][]string{{"deploy", f, "--yes"}, {"plan", f}, {"destroy", f, "--yes"}, {"state", "list", "--app", e.app}} {
		r := e.gc(args...)
		if r.code != exitError || !strings.Contains(r.stderr, "has no document, but traces of one were found") || !strings.Contains(r.stderr, "gcompose state recover --app "+e.app) {
			t.Fatalf("%s without its document: exit %d\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
		if args[0] == "deploy" {
			t.Logf("deploy after APP.json was deleted:\n%s", r.stderr)
		}
	}
	r := e.must("state", "recover", "--app", e.app, "--dry-run")
	if !strings.Contains(r.stdout, `"lineage": "`+was) || !strings.Contains(r.stderr, "from "+e.app+".json.backup") {
		t.Fatalf("recover --dry-run:\n%s%s", r.stdout, r.stderr)
	}
	r = e.must("state", "recover", "--app", e.app)
	t.Logf("state recover:\n%s%s", r.stderr, r.stdout)
	if r = e.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") || lineage() != was || e.creates() != 2 {
		t.Fatalf("deploy after recovery (lineage %s, was %s; %d creates):\n%s%s", lineage(), was, e.creates(), r.stdout, r.stderr)
	}

	// 2. A flipped byte in the document.
	b, _ := os.ReadFile(doc)
	i := bytes.Index(b, []byte(`"Active"`)) + 2
	b[i] ^= 0x20
	os.WriteFile(doc, b, 0o600)
	r = e.gc("deploy", f, "--yes")
	if r.code != exitError || !strings.Contains(r.stderr, doc) || !strings.Contains(r.stderr, "checksum mismatch") {
		t.Fatalf("deploy with a flipped byte: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("deploy with a flipped byte in the document:\n%s", r.stderr)
	e.must("state", "recover", "--app", e.app)
	if r = e.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") || e.creates() != 2 {
		t.Fatalf("deploy after recovering a damaged document:\n%s%s", r.stdout, r.stderr)
	}

	// 3. --force-new-state: a new lineage; the traces kept aside.
	os.Remove(doc)
	before, _ := filepath.Glob(filepath.Join(e.state, e.app+".*.old-*"))
	r = e.must("deploy", f, "--yes", "--force-new-state")
	if lineage() == was || lineage() == "" {
		t.Fatalf("--force-new-state kept lineage %s\n%s%s", was, r.stdout, r.stderr)
	}
	if aside, _ := filepath.Glob(filepath.Join(e.state, e.app+".*.old-*")); len(aside) <= len(before) {
		t.Fatalf("traces not kept aside: %v (before: %v)", aside, before)
	}
	e.must("destroy", f, "--yes")
}

// The etcd head deleted (resource keys still there): refused, recovered.
func TestE2ENoSilentFreshStartEtcd(t *testing.T) {
	e := newEnv(t)
	c := etcdtest.Start(t)
	url := "etcd://" + c.HostPorts() + "/fresh"
	f := e.write("app.yaml", strings.Replace(twoFiles, "VALUE", "one", 1))
	gc := func(args ...string) result {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"gcompose"}, args...), "--state", url), strings.NewReader(""), &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	if r := gc("deploy", f, "--yes"); r.code != 0 {
		t.Fatalf("deploy: %s", r.stderr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Delete(context.Background(), "/fresh/apps/"+e.app+"/head"); err != nil {
		t.Fatal(err)
	}
	r := gc("deploy", f, "--yes")
	if r.code != exitError || !strings.Contains(r.stderr, "resource keys (serial") || !strings.Contains(r.stderr, "gcompose state recover") {
		t.Fatalf("deploy without the head: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("deploy after the etcd head was deleted:\n%s", r.stderr)
	if r := gc("state", "recover", "--app", e.app); r.code != 0 {
		t.Fatalf("recover: %s", r.stderr)
	} else {
		t.Logf("state recover:\n%s%s", r.stderr, r.stdout)
	}
	if r := gc("deploy", f, "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Nothing to do") || e.creates() != 2 {
		t.Fatalf("deploy after recovery:\n%s%s", r.stdout, r.stderr)
	}
	if r := gc("destroy", f, "--yes"); r.code != 0 {
		t.Fatalf("destroy: %s", r.stderr)
	}
}

// A first deploy of an application whose long-lived containers exist (its
// state is elsewhere, or lost) is refused naming them; plan warns;
// --force-new-state deploys anyway.
func TestE2EFirstDeployRefusedWhenContainersExist(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cli := testimage.Client(t)
	labels := testimage.Labels(t)
	labels["gcompose.app"] = e.app
	labels["gcompose.resource"] = "payments"
	labels["gcompose.longlived"] = "true"
	name := "gcompose-" + e.app + "-payments"
	created, err := cli.ContainerCreate(ctx, &container.Config{Image: e.image, Labels: labels}, nil, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			cli.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true})
		}
	})
	f := e.write("app.yaml", strings.Replace(twoFiles, "VALUE", "one", 1))
	r := e.gc("deploy", f, "--yes")
	if r.code != exitError || !strings.Contains(r.stderr, "objects of it already exist") || !strings.Contains(r.stderr, "container "+name+" (resource payments, created") || !strings.Contains(r.stderr, "--force-new-state") {
		t.Fatalf("first deploy next to a container of the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("first deploy while a container of the app exists:\n%s", r.stderr)
	if e.exists("a.txt") {
		t.Fatal("the refused deploy created a.txt")
	}
	if r := e.must("plan", f); !strings.Contains(r.stderr, "deploy would refuse") {
		t.Fatalf("plan does not warn:\n%s", r.stderr)
	}
	e.must("deploy", f, "--yes", "--force-new-state")
	if e.read("a.txt") != "one" {
		t.Fatal("forced deploy did not deploy")
	}
	// The container must not block later deploys (not a first deploy).
	e.must("deploy", f, "--yes")
	if err := cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	removed = true
	e.must("destroy", f, "--yes")
}

// An action that fails (the adapter exits with an error) is reported by the
// next run as a failed create, with the error, not as an interrupted one.
func TestE2EFailedActionReportedAsFailed(t *testing.T) {
	e := newEnv(t)
	failing := strings.Replace(twoFiles, `content: "VALUE"`, `content: "one", fail: "disk full"`, 1)
	f := e.write("app.yaml", failing)
	if r := e.gc("deploy", f, "--yes"); r.code != exitError || !strings.Contains(r.stderr, "disk full") {
		t.Fatalf("deploy with a failing action: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	f = e.write("app.yaml", strings.Replace(twoFiles, "VALUE", "one", 1))
	r := e.must("deploy", f, "--yes")
	all := r.stdout + r.stderr
	if !strings.Contains(all, "resources.a: its create failed in an earlier run (operation ") || !strings.Contains(all, "disk full") || strings.Contains(all, "interrupted") {
		t.Fatalf("the next deploy:\n%s", all)
	}
	t.Logf("the deploy after a failed one:\n%s", all)
	e.must("destroy", f, "--yes")
}
