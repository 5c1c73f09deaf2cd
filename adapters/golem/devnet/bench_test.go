package devnet_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// BenchmarkRentAndRelease: allocation, demand, negotiation, agreement approved, terminated, over HTTP.
func BenchmarkRentAndRelease(b *testing.B) {
	e := start(b, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 1}}})
	ctx := ctxT(b, 10*time.Minute)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		neg := e.rent(ctx, taskPackage(testHash))
		if err := e.c.TerminateAgreement(ctx, neg.agreement, nil); err != nil {
			b.Fatal(err)
		}
		_ = e.c.UnsubscribeDemand(ctx, neg.demandID)
	}
}

// BenchmarkActivity: per iteration, an activity deployed on a VPN, started, one run captured, and
// a page fetched through the websocket tunnel from a server started in the background; then destroyed.
func BenchmarkActivity(b *testing.B) {
	e := start(b, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 1}}})
	buildProviderImage(b, e.docker)
	ctx := ctxT(b, 10*time.Minute)
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.50.0", Mask: "255.255.255.0"})
	if err != nil {
		b.Fatal(err)
	}
	neg := e.rent(ctx, taskPackage(testHash))
	if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: neg.providerID, IP: "10.213.50.2"}); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.c.DialTCPConn(ctx, n.ID, "10.213.50.2", 4001)
	}}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		act, err := e.c.CreateActivity(ctx, neg.agreement)
		if err != nil {
			b.Fatal(err)
		}
		batch, err := e.c.ExecCommands(ctx, act.ActivityID,
			yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: "10.213.50.2"}}}},
			yagna.ExeScriptCommand{Start: &yagna.StartCommand{}},
			run("/bin/sh", "-c", "/devnet-db > /dev/null 2>&1 &"))
		if err != nil {
			b.Fatal(err)
		}
		if res, err := e.c.WaitBatch(ctx, act.ActivityID, batch, 5*time.Second); err != nil || len(res) != 3 {
			b.Fatalf("batch: %+v, %v", res, err)
		}
		for {
			resp, err := hc.Get("http://db/status")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := e.c.DestroyActivity(ctx, act.ActivityID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTunnelRequest: one HTTP request through a fresh websocket tunnel to a running server.
func BenchmarkTunnelRequest(b *testing.B) {
	e := start(b, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 1}}})
	buildProviderImage(b, e.docker)
	ctx := ctxT(b, 10*time.Minute)
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.51.0", Mask: "255.255.255.0"})
	if err != nil {
		b.Fatal(err)
	}
	neg := e.rent(ctx, taskPackage(testHash))
	act, err := e.c.CreateActivity(ctx, neg.agreement)
	if err != nil {
		b.Fatal(err)
	}
	batch, err := e.c.ExecCommands(ctx, act.ActivityID,
		yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: "10.213.51.2"}}}},
		yagna.ExeScriptCommand{Start: &yagna.StartCommand{}},
		run("/bin/sh", "-c", "/devnet-db > /dev/null 2>&1 &"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.c.WaitBatch(ctx, act.ActivityID, batch, 5*time.Second); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return e.c.DialTCPConn(ctx, n.ID, "10.213.51.2", 4001)
	}}}
	get := func() error {
		resp, err := hc.Get("http://db/status")
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	for get() != nil {
		time.Sleep(20 * time.Millisecond)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := get(); err != nil {
			b.Fatal(err)
		}
	}
}
