package e2e

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// manifestApp has a vm/manifest payload and a plain vm payload that names no
// capabilities, both on a network.
func manifestApp() string {
	manifest := base64.StdEncoding.EncodeToString([]byte(`{"version":"0.1.0","createdAt":"2026-01-01T00:00:00Z","expiresAt":"2100-01-01T00:00:00Z",` +
		`"payload":[{"platform":{"arch":"x86_64","os":"linux"},"urls":["http://registry.invalid/db.gvmi"],"hash":"sha3:` + dbHash + `"}]}`))
	return `
payloads:
  manifest:
    runtime: vm/manifest
    params:
      manifest: "` + manifest + `"
  plain:
    runtime: vm
    params:
      image_hash: "` + dbHash + `"
networks:
  default:
    ip: "10.78.0.0/24"
services:
  m:
    payload: manifest
    network: default
  v:
    payload: plain
    network: default
`
}

// TestRuntimeAndCapabilities: providers advertise runtime vm, with
// manifest-support only where they read manifests and vpn only where the VM
// can join a VPN (the devnet's first providers have neither). A vm/manifest
// payload lands on a manifest-capable provider (the adapters used to ask for
// runtime vm/manifest, which no provider offers), and a service on a network
// that names no capabilities lands on a provider with vpn (it used to land
// on the first provider, whose VM then joined no network).
func TestRuntimeAndCapabilities(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "novpn", Count: 2, Capabilities: []string{"inet"}},
		{Name: "nomanifest", Count: 1, Capabilities: []string{"inet", "vpn"}},
		{Name: "full", Count: 2},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(manifestApp()), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if p := e.field(ctx, "services.m", "provider_name"); !strings.HasPrefix(p, "full-") {
		t.Errorf("the manifest payload runs on %s, want a provider with manifest-support", p)
	}
	if p := e.field(ctx, "services.v", "provider_name"); strings.HasPrefix(p, "novpn") {
		t.Errorf("the service on a network runs on %s, which has no vpn capability", p)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 || s.Demands != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// TestPaymentsWithoutFunds: when no account can cover the budget, the deploy
// fails with yagna's explanation in full (the RFC 7807 detail and amounts)
// and what to do, and destroy leaves nothing.
func TestPaymentsWithoutFunds(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{Accounts: map[string]string{"erc20-hoodi-tglm": "1", "erc20-polygon-glm": "1000"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(manifestApp()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.gcompose(ctx, "deploy", "-f", desc, "--yes")
	if err == nil {
		t.Fatalf("deploy with 1 tGLM for a budget of 5 succeeded:\n%s", out)
	}
	for _, want := range []string{
		"Insufficient funds to create the allocation. Top up your account or release all existing allocations to unlock the funds via `yagna payment release-allocations`",
		"availableFunds 1", "requestedFunds 5", "erc20-hoodi-tglm", "yagna payment fund",
		"erc20-polygon-glm spend real GLM and are used only when named",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the failure does not say %q:\n%s", want, out)
		}
	}
	if s := e.summary(ctx); s.Allocations != 0 || s.Agreements != 0 {
		t.Errorf("after the failed deploy: %+v", s)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Networks != 0 || s.Allocations != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// TestAllocationTimeout: the allocation gets a bounded timeout that its
// keeper keeps moving ahead, so an app whose keeper is gone for longer frees
// its funds by itself (yagna releases an allocation at its timeout, and
// keeps one without a timeout for ten years).
func TestAllocationTimeout(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	app := `
resources:
  golem-payments:
    type: ` + e.images["payments"] + `
    config:
      budget: "2"
      allocation_timeout: 12s
`
	if err := os.WriteFile(desc, []byte(app), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	id := e.field(ctx, pay, "allocation_id")
	a, err := e.yc.GetAllocation(ctx, id)
	if err != nil || a.Timeout == nil || a.Timeout.After(time.Now().Add(13*time.Second)) {
		t.Fatalf("allocation timeout %v, %v: want about 12 s ahead", a.Timeout, err)
	}
	first := *a.Timeout
	// Past the first timeout, the keeper has moved it ahead.
	time.Sleep(time.Until(first) + 3*time.Second)
	a, err = e.yc.GetAllocation(ctx, id)
	if err != nil || !a.Timeout.After(first) {
		t.Fatalf("allocation after its first timeout: %+v, %v; the keeper should have moved it ahead", a.Timeout, err)
	}
	// Without the keeper, yagna releases it at its timeout; the next plan sees it gone.
	if err := e.docker.ContainerKill(ctx, e.field(ctx, pay, "keeper"), "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.yc.GetAllocation(ctx, id)
		if yagna.IsNotFound(err) { // a released allocation answers 404 (core/payment/src/dao/allocation.rs get filters released ones)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation still there 30 s after its keeper died: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ops := e.planOps(ctx, desc); ops[pay] != "create" {
		t.Fatalf("plan after the allocation timed out: %v", ops)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Allocations != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
