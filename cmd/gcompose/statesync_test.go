package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
	"github.com/gcompose/gcompose/core/stateurl"
)

// gcompose runs the CLI in-process with an empty etcd environment.
func gcompose(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	for _, e := range []string{stateurl.EnvCACert, stateurl.EnvCert, stateurl.EnvKey, stateurl.EnvUser, stateurl.EnvPassword, stateurl.EnvLockTTL, "GCOMPOSE_STATE"} {
		t.Setenv(e, "")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"gcompose"}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func openURL(t *testing.T, url string) state.Store {
	t.Helper()
	s, err := stateurl.Open(context.Background(), url, stateurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func load(t *testing.T, s state.Store, app string) *state.Document {
	t.Helper()
	d, err := s.Load(context.Background(), app)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sameResources(t *testing.T, a, b *state.Document) {
	t.Helper()
	ja, _ := json.Marshal(a.Resources)
	jb, _ := json.Marshal(b.Resources)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("resources differ:\n%s\n%s", ja, jb)
	}
}

// state mv file -> etcd -> file keeps lineage, serial and every resource.
func TestStateMoveRoundTrip(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	dir := t.TempDir()
	etcdURL := "etcd://" + c.HostPorts() + "/mv"

	fs := openURL(t, dir)
	l, err := fs.Lock(ctx, "shop", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		r := statetest.Res(fmt.Sprintf("r%d", i), i)
		if i == 4 {
			r.Pending = state.NewOperation(state.OpCreate, "create", l)
		}
		if err := fs.Apply(ctx, l, state.Put(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	orig := load(t, fs, "shop")

	code, out, errs := gcompose(t, "", "state", "mv", "--app", "shop", "--state", dir, "--to", etcdURL, "--remove-source")
	if code != 0 {
		t.Fatalf("mv file -> etcd: %d %s %s", code, out, errs)
	}
	t.Log(strings.TrimSpace(out))
	es := openURL(t, etcdURL)
	d := load(t, es, "shop")
	if d.Lineage != orig.Lineage || d.Serial != orig.Serial {
		t.Fatalf("in etcd: lineage %s serial %d; want %s %d", d.Lineage, d.Serial, orig.Lineage, orig.Serial)
	}
	sameResources(t, orig, d)
	if apps, _ := fs.Apps(ctx); len(apps) != 0 {
		t.Fatalf("file source not removed: %v", apps)
	}
	if _, err := os.Stat(filepath.Join(dir, "shop.json.removed")); err != nil {
		t.Fatalf("the removed source is not kept: %v", err)
	}

	code, out, errs = gcompose(t, "", "state", "mv", "--app", "shop", "--state", etcdURL, "--to", "file://"+dir, "--remove-source")
	if code != 0 {
		t.Fatalf("mv etcd -> file: %d %s %s", code, out, errs)
	}
	back := load(t, openURL(t, dir), "shop")
	if back.Lineage != orig.Lineage || back.Serial != orig.Serial {
		t.Fatalf("back in the file: lineage %s serial %d; want %s %d", back.Lineage, back.Serial, orig.Lineage, orig.Serial)
	}
	sameResources(t, orig, back)
	if !reflect.DeepEqual(back.PendingResources()[0].Pending, orig.PendingResources()[0].Pending) {
		t.Fatalf("pending operation changed")
	}
	if apps, _ := es.Apps(ctx); len(apps) != 0 {
		t.Fatalf("etcd source not removed: %v", apps)
	}

	// Without --remove-source the source stays; moving onto a target with
	// another lineage is refused unless --force.
	code, _, errs = gcompose(t, "", "state", "mv", "--app", "shop", "--state", dir, "--to", etcdURL)
	if code != 0 {
		t.Fatalf("mv keeping the source: %s", errs)
	}
	if apps, _ := fs.Apps(ctx); len(apps) != 1 {
		t.Fatalf("source removed without --remove-source")
	}
	other := state.NewDocument("shop")
	other.Lineage, other.Serial = state.NewID(), 1
	ol, _ := es.Lock(ctx, "shop", state.NewLockInfo("test", "test"))
	if err := es.Replace(ctx, ol, other, true); err != nil {
		t.Fatal(err)
	}
	es.Unlock(ctx, ol)
	code, _, errs = gcompose(t, "", "state", "mv", "--app", "shop", "--state", dir, "--to", etcdURL)
	if code == 0 || !strings.Contains(errs, "lineage") {
		t.Fatalf("mv over another lineage: %d %s", code, errs)
	}
	code, _, errs = gcompose(t, "", "state", "mv", "--app", "shop", "--state", dir, "--to", etcdURL, "--force")
	if code != 0 {
		t.Fatalf("forced mv: %s", errs)
	}
	if d := load(t, es, "shop"); d.Lineage != orig.Lineage {
		t.Fatalf("forced mv: lineage %s", d.Lineage)
	}
}

func TestStatePullPush(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	url := "etcd://" + c.HostPorts() + "/pp"
	es := openURL(t, url)
	l, _ := es.Lock(ctx, "shop", state.NewLockInfo("deploy", "test"))
	for i := range 3 {
		if err := es.Apply(ctx, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i))); err != nil {
			t.Fatal(err)
		}
	}

	// state lock shows the holder.
	code, out, errs := gcompose(t, "", "state", "lock", "--app", "shop", "--state", url)
	if code != 0 || !strings.Contains(out, l.Info.ID) || !strings.Contains(out, `"operation": "deploy"`) {
		t.Fatalf("state lock: %d %s %s", code, out, errs)
	}
	// push waits for nobody: locked.
	code, out, _ = gcompose(t, "", "state", "pull", "--app", "shop", "--state", url)
	if code != 0 {
		t.Fatalf("pull: %d", code)
	}
	code, _, errs = gcompose(t, out, "state", "push", "--state", url, "-")
	if code == 0 || !strings.Contains(errs, "gcompose unlock "+l.Info.ID) {
		t.Fatalf("push while locked: %d %s", code, errs)
	}
	es.Unlock(ctx, l)

	var pulled state.Document
	if err := json.Unmarshal([]byte(out), &pulled); err != nil || pulled.Serial != 3 || len(pulled.Resources) != 3 {
		t.Fatalf("pulled %s: %v", out, err)
	}
	file := filepath.Join(t.TempDir(), "shop.json")
	delete(pulled.Resources, "r0")
	b, _ := json.Marshal(pulled)
	os.WriteFile(file, b, 0o600)
	// The same serial pushed back: accepted, the serial goes on.
	code, out, errs = gcompose(t, "", "state", "push", "--state", url, file)
	if code != 0 || !strings.Contains(out, "serial 4") {
		t.Fatalf("push: %d %s %s", code, out, errs)
	}
	if d := load(t, es, "shop"); d.Serial != 4 || len(d.Resources) != 2 || d.Lineage != pulled.Lineage {
		t.Fatalf("after push: serial %d, %d resources", d.Serial, len(d.Resources))
	}
	// Now the file is older: refused unless --force.
	code, _, errs = gcompose(t, "", "state", "push", "--state", url, file)
	if code == 0 || !strings.Contains(errs, "older than the stored 4") {
		t.Fatalf("push of an older serial: %d %s", code, errs)
	}
	pulled.Lineage = state.NewID()
	pulled.Serial = 10
	b, _ = json.Marshal(pulled)
	os.WriteFile(file, b, 0o600)
	code, _, errs = gcompose(t, "", "state", "push", "--state", url, file)
	if code == 0 || !strings.Contains(errs, "lineage") {
		t.Fatalf("push of another lineage: %d %s", code, errs)
	}
	code, _, errs = gcompose(t, "", "state", "push", "--state", url, "--app", "other", file)
	if code == 0 || !strings.Contains(errs, `not "other"`) {
		t.Fatalf("push under another name: %d %s", code, errs)
	}
	code, _, errs = gcompose(t, "", "state", "push", "--state", url, "--force", file)
	if code != 0 {
		t.Fatalf("forced push: %s", errs)
	}
	if d := load(t, es, "shop"); d.Serial != 10 || d.Lineage != pulled.Lineage {
		t.Fatalf("after forced push: serial %d lineage %s", d.Serial, d.Lineage)
	}
	// Not a state document.
	os.WriteFile(file, []byte(`{"services": {}}`), 0o600)
	if code, _, errs = gcompose(t, "", "state", "push", "--state", url, file); code == 0 || !strings.Contains(errs, `unknown key "services"`) {
		t.Fatalf("push of a descriptor: %d %s", code, errs)
	}
	// Pull of an application without state.
	if code, _, errs = gcompose(t, "", "state", "pull", "--app", "none", "--state", url); code == 0 || !strings.Contains(errs, "no state") {
		t.Fatalf("pull of nothing: %d %s", code, errs)
	}
	// A password in the URL is refused without being shown.
	if code, _, errs = gcompose(t, "", "state", "pull", "--app", "shop", "--state", "etcd://u:hunter2@"+c.HostPorts()+"/pp"); code == 0 || strings.Contains(errs, "hunter2") {
		t.Fatalf("password in URL: %d %s", code, errs)
	}
}

func TestStateLockUnlockEtcd(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	url := "etcd://" + c.HostPorts() + "/unlock"
	es := openURL(t, url)
	l, err := es.Lock(ctx, "shop", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if code, out, errs := gcompose(t, "", "unlock", "--app", "shop", "--state", url, "not-the-id"); code == 0 || !strings.Contains(errs, l.Info.ID) {
		t.Fatalf("unlock with a wrong ID: %d %s %s", code, out, errs)
	}
	if code, out, errs := gcompose(t, "", "unlock", "--app", "shop", "--state", url, l.Info.ID); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("unlock: %d %s %s", code, out, errs)
	}
	if code, out, _ := gcompose(t, "", "state", "lock", "--app", "shop", "--state", url); code != 0 || !strings.Contains(out, "not locked") {
		t.Fatalf("state lock after unlock: %d %s", code, out)
	}
	if err := es.Apply(ctx, l, state.Put(statetest.Res("a", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("write after gcompose unlock: %v", err)
	}
	// A document from a newer gcompose is refused before anything else.
	file := filepath.Join(t.TempDir(), "new.json")
	os.WriteFile(file, []byte(`{"format_version": 99, "future_field": 1, "resources": {}}`), 0o600)
	if code, _, errs := gcompose(t, "", "state", "push", "--app", "shop", "--state", url, file); code == 0 || !strings.Contains(errs, "upgrade gcompose") {
		t.Fatalf("push of a newer format: %d %s", code, errs)
	}
}
