package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
)

// A deploy whose state lives in a three-member etcd cluster completes when a
// member is killed in the middle of it, and the state it leaves is whole:
// every resource Active, a re-deploy changes nothing, destroy empties it.
func TestE2EDeployOnEtcdClusterSurvivesMemberLoss(t *testing.T) {
	e := newEnv(t)
	cluster := etcdtest.StartCluster(t, 3)
	url := "etcd://" + cluster.HostPorts() + "/e2e"
	f := e.write("app.yaml", chain(8))
	gc := func(args ...string) result {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"gcompose"}, args...), "--state", url), strings.NewReader(""), &out, &errb)
		return result{code, out.String(), errb.String()}
	}

	done := make(chan result, 1)
	go func() { done <- gc("deploy", f, "--yes") }()
	// Kill once a few resources are in: r1's file is written (the state in
	// etcd holds r0), r7 is far from started (each takes 300 ms).
	journal := filepath.Join(e.files, ".file-adapter.log")
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(journal); strings.Contains(string(b), "create r1.txt\n") {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the deploy ended before r1 was created: the test proves nothing\n%s%s", r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("r1 not created in 2 minutes")
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the deploy finished before the member was killed: the test proves nothing\n%s%s", r.stdout, r.stderr)
	default:
	}
	cluster.Members[0].Kill()
	t.Logf("killed etcd member %s during the deploy", cluster.Members[0].Name)
	var r result
	select {
	case r = <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("deploy did not finish after an etcd member was killed")
	}
	if r.code != 0 {
		t.Fatalf("deploy with a member killed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for i := 0; i < 8; i++ {
		if got := e.read(fmt.Sprintf("r%d.txt", i)); got != fmt.Sprint(i) {
			t.Fatalf("r%d.txt = %q", i, got)
		}
	}
	ls := gc("state", "list", "--app", e.app)
	if n := strings.Count(ls.stdout, "Active"); ls.code != 0 || n != 8 {
		t.Fatalf("state in etcd after the deploy: %d Active (exit %d)\n%s%s", n, ls.code, ls.stdout, ls.stderr)
	}
	if r := gc("deploy", f, "--yes"); r.code != 0 || !strings.Contains(r.stdout, "Nothing to do") {
		t.Fatalf("re-deploy with two members left: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := gc("destroy", f, "--yes"); r.code != 0 {
		t.Fatalf("destroy: exit %d\n%s", r.code, r.stderr)
	}
	if ls := gc("state", "list", "--app", e.app); strings.Contains(ls.stdout, "resources.") {
		t.Fatalf("state not empty after destroy:\n%s", ls.stdout)
	}
}
