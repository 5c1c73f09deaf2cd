package devnet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/testimage"
)

// The hashes of the shell-less payload images (Config.Images): testdata/payloadapp of the e2e tests
// alone in a FROM scratch image, its counter as ENTRYPOINT (run as root, or as USER 65534), or no
// ENTRYPOINT at all.
const (
	counterHash = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"
	noEntryHash = "e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0"
	nobodyHash  = "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
)

func shellLessImages(t *testing.T) map[string]string {
	ctx := ctxT(t, 5*time.Minute)
	base := testimage.Image(t, ctx, "./adapters/golem/e2e/testdata/payloadapp", "gcompose-test/payloadapp:e2e")
	return map[string]string{
		counterHash: testimage.DerivedImage(t, ctx, "FROM "+base+"\nENTRYPOINT [\"/payloadapp\", \"counter\"]\n", "gcompose-test/payloadapp-counter:e2e"),
		noEntryHash: testimage.DerivedImage(t, ctx, "FROM "+base+"\nENTRYPOINT []\n", "gcompose-test/payloadapp-noentry:e2e"),
		nobodyHash:  testimage.DerivedImage(t, ctx, "FROM "+base+"\nUSER 65534\nENTRYPOINT [\"/payloadapp\", \"counter\"]\n", "gcompose-test/payloadapp-nobody:e2e"),
	}
}

// TestShellLessPayload: an image of one static binary, without shell, ip or init, deploys on a VPN,
// starts, and runs its own binary; its ENTRYPOINT runs only when the start asks for it
// (start-entrypoint) on a provider that advertises it, as ya-runtime-vm (runtime/src/lib.rs start), and
// a start that asks for it on an image without one fails with ya-runtime-vm's words. On the devnet
// that joined the VPN through /bin/sh in the payload, every start failed ("exec: /bin/sh: no such
// file"), and the image without ENTRYPOINT or CMD did not even deploy (no command specified).
func TestShellLessPayload(t *testing.T) {
	withCap := []string{"vpn", "inet", "manifest-support", "start-entrypoint"}
	e := start(t, devnet.Config{Images: shellLessImages(t), Providers: []devnet.ProviderConfig{
		{Name: "ep", Count: 4, Capabilities: withCap},
		{Name: "old", Count: 1, Capabilities: []string{"vpn", "inet"}, Properties: map[string]any{"test.kind": "old"}},
	}})
	ctx := ctxT(t, 4*time.Minute)
	const hasCap = "(golem.runtime.capabilities=start-entrypoint)"
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.71.0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	t.Cleanup(func() { _ = e.c.DeleteNetwork(context.Background(), n.ID) })
	// node rents a provider that meets where for the image hash, joins it to the VPN at ip and starts
	// it with args.
	node := func(where, hash, ip string, args []string) (string, []yagna.ExeScriptCommandResult) {
		neg := e.rentWhere(ctx, taskPackage(hash), where)
		t.Cleanup(func() {
			_ = e.c.TerminateAgreement(context.Background(), neg.agreement, yagna.TerminationReason("test over"))
			_ = e.c.ReleaseAllocation(context.Background(), neg.alloc.AllocationID)
		})
		if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: neg.providerID, IP: ip}); err != nil {
			t.Fatal(err)
		}
		act, err := e.c.CreateActivity(ctx, neg.agreement)
		if err != nil {
			t.Fatal(err)
		}
		return act.ActivityID, e.exec(ctx, act.ActivityID,
			yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: ip}}}},
			yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: args}})
	}
	ok := func(what string, res []yagna.ExeScriptCommandResult) {
		t.Helper()
		for _, r := range res {
			if r.Result != yagna.ResultOk {
				t.Fatalf("%s: command %d: %+v", what, r.Index, r)
			}
		}
	}
	// get runs the image's own binary in act: GET url from inside the node.
	get := func(act, url string) (string, bool) {
		res := e.exec(ctx, act, run("/payloadapp", "get", url))
		if len(res) != 1 {
			t.Fatalf("get %s: %+v", url, res)
		}
		return res[0].Stdout + res[0].Stderr + res[0].Message, res[0].Result == yagna.ResultOk
	}

	served, res := node(hasCap, counterHash, "10.213.71.2", []string{"start-entrypoint"})
	ok("start-entrypoint", res)
	var out string
	var up bool
	for i := 0; i < 40 && !up; i++ {
		if out, up = get(served, "http://127.0.0.1:8080/count"); !up {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !up || out != "1" {
		t.Fatalf("the entrypoint started with start-entrypoint does not serve: %q", out)
	}

	plain, res := node(hasCap, counterHash, "10.213.71.3", []string{})
	ok("start without args", res)
	// Across the VPN: this node reaches the other's entrypoint at its VPN address.
	if out, up := get(plain, "http://10.213.71.2:8080/count"); !up || out != "2" {
		t.Fatalf("the counter across the VPN: %q", out)
	}
	if out, up := get(plain, "http://127.0.0.1:8080/count"); up {
		t.Fatalf("a start without start-entrypoint ran the image's entrypoint: %q", out)
	}
	if res := e.exec(ctx, plain, run("/payloadapp", "set-counter", "10.213.71.2")); len(res) != 1 || res[0].Result != yagna.ResultOk || res[0].Stdout != "counter at 10.213.71.2\n" {
		t.Fatalf("running the image's own binary: %+v", res)
	}

	old, res := node("(test.kind=old)", counterHash, "10.213.71.4", []string{"start-entrypoint"})
	ok("start-entrypoint on a provider without the capability", res)
	if out, up := get(old, "http://127.0.0.1:8080/count"); up {
		t.Fatalf("a provider without start-entrypoint ran the image's entrypoint: %q", out)
	}

	// An image whose USER is not root: devnet-init, its PID 1, runs as that user from the relay's
	// directory (initshare.go), the VPN join as root, the entrypoint and the runs as that user.
	nobody, res := node(hasCap, nobodyHash, "10.213.71.6", []string{"start-entrypoint"})
	ok("an image of USER 65534", res)
	up = false
	for i := 0; i < 40 && !up; i++ {
		if out, up = get(nobody, "http://127.0.0.1:8080/count"); !up {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !up || out != "1" {
		t.Fatalf("the entrypoint of an image of USER 65534 does not serve: %q", out)
	}
	if out, up := get(plain, "http://10.213.71.6:8080/count"); !up || out != "2" {
		t.Fatalf("the counter of the USER 65534 node across the VPN: %q", out)
	}

	_, res = node(hasCap, noEntryHash, "10.213.71.5", []string{"start-entrypoint"})
	if len(res) != 2 || res[0].Result != yagna.ResultOk || res[1].Result != yagna.ResultError ||
		!strings.Contains(res[1].Message, "'start_entrypoint' flag is set but the container does not define an entrypoint!") {
		t.Fatalf("start-entrypoint on an image without entrypoint: %+v", res)
	}
}
