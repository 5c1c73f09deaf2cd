package devnet_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// The golem.image.hash labels of images/devnet-db.Dockerfile and images/devnet-web.Dockerfile.
const (
	dbHash  = "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
	webHash = "6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b"
)

// webappFlow deploys db and web providers on a VPN <prefix>.0/24 and checks the page.
func webappFlow(ctx context.Context, t *testing.T, e *env, identity, prefix string) {
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: prefix + ".0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	t.Cleanup(func() { _ = e.c.DeleteNetwork(context.Background(), n.ID) })
	if err := e.c.AddAddress(ctx, n.ID, prefix+".1"); err != nil {
		t.Fatal(err)
	}
	deploy := func(hash, ip string, init ...yagna.ExeScriptCommand) (string, string) {
		neg := e.rent(ctx, taskPackage(hash))
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
		cmds := append([]yagna.ExeScriptCommand{
			{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: ip}}}},
			{Start: &yagna.StartCommand{}},
		}, init...)
		for _, r := range e.exec(ctx, act.ActivityID, cmds...) {
			if r.Result != yagna.ResultOk {
				t.Fatalf("%s command %d: %+v", hash[:8], r.Index, r)
			}
		}
		return act.ActivityID, neg.agreement
	}
	dbIP, webIP := prefix+".2", prefix+".3"
	deploy(dbHash, dbIP, run("/bin/sh", "-c", "/devnet-db -listen :4001 > /tmp/db.out 2> /tmp/db.err &"))
	deploy(webHash, webIP,
		run("/devnet-web", "--db-address", dbIP, "--db-port", "4001", "initdb"),
		run("/bin/sh", "-c", "/devnet-web --db-address "+dbIP+" --db-port 4001 run > /tmp/web.out 2> /tmp/web.err &"))

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.c.DialTCPConn(ctx, n.ID, webIP, 80)
	}, DisableKeepAlives: true}, Timeout: 20 * time.Second}
	var page string
	for i := 0; i < 50; i++ {
		resp, err := hc.Get("http://web/")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				page = string(b)
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, want := range []string{"gcompose devnet webapp", "greeting", "through the devnet VPN", "visit-", "database at http://" + dbIP + ":4001"} {
		if !strings.Contains(page, want) {
			t.Fatalf("page lacks %q:\n%s", want, page)
		}
	}
	_ = identity
}

// TestWebappDemo is the same flow on an in-process devnet with freshly built demo images (the config's
// images map points the hashes at them), done twice on one VPN range, as two apps (or two users' copies
// of one example) would: real yagna lets them share a range, and so must the devnet's Docker bridges.
func TestWebappDemo(t *testing.T) {
	e := start(t, devnet.Config{
		Images:    map[string]string{dbHash: buildProviderImage(t, nil), webHash: buildWebImage(t, nil)},
		Providers: []devnet.ProviderConfig{{Name: "p", Count: 4}},
	})
	ctx := ctxT(t, 3*time.Minute)
	webappFlow(ctx, t, e, e.srv.Identity(), "10.213.31")
	webappFlow(ctx, t, e, e.srv.Identity(), "10.213.31")
}
