package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// membersApp is an app of services on one VPN, each on the demo db image
// with one init command; extra is added under services:.
func (e *env) membersApp(name, aInit, extra string) string {
	e.t.Helper()
	text := `meta:
  name: members
payloads:
  p:
    runtime: vm
    capabilities: [vpn]
    params:
      image_hash: "` + dbHash + `"
      offer_window: "1s"
networks:
  default:
    ip: "192.168.78.1/24"
services:
  a:
    payload: p
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "echo ` + aInit + `"]
  b:
    payload: p
    network: default
` + extra
	f := filepath.Join(e.dir, name)
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return f
}

// TestRebuiltMembersNeedFreeProviders: on a devnet with exactly as many
// providers as the app will have members (3), a and b run on two of them;
// a's init changes (a is rebuilt: its replacement is rented while it runs)
// and a new member c joins the VPN.
//   - c rents at once with a's replacement: both need the one free
//     provider, and the plan refuses naming a's claim. The old plan counted
//     a as keeping its provider, passed, and the deploy's two rentals raced
//     for the one offer (the loser waits out its negotiation timeout);
//   - c depends on a: the provider a leaves is free for c once a's rebuild
//     is done; the plan prices c at a's agreed price and says so, and the
//     deploy rents c there.
func TestRebuiltMembersNeedFreeProviders(t *testing.T) {
	e := start(t, devnet.Config{Providers: reconcileProviders(3)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	base := e.membersApp("members.yaml", "one", "")
	e.must(ctx, "deploy", "-f", base, "--yes")
	oldA := e.field(ctx, "services.a", "provider_id")
	oldB := e.field(ctx, "services.b", "provider_id")
	if oldA == "" || oldB == "" || oldA == oldB {
		t.Fatalf("a on %q, b on %q: want two providers", oldA, oldB)
	}
	deployed := time.Since(began)

	// c at once with a's rebuild: one free provider for two rentals.
	race := e.membersApp("race.yaml", "two", "  c:\n    payload: p\n    network: default\n")
	out, err := e.gcompose(ctx, "plan", "-f", race)
	t.Logf("plan, a rebuilt and c new at once:\n%s", out)
	if exitCode(err) != 1 || !strings.Contains(out, "need distinct providers") || !strings.Contains(out, "services.a takes") {
		t.Fatalf("the plan does not refuse naming a's rebuild (%v):\n%s", err, out)
	}
	if now := e.field(ctx, "services.a", "provider_id"); now != oldA {
		t.Fatalf("the refused plan moved a from %s to %s", oldA, now)
	}

	// c after a: it takes the provider a's rebuild frees.
	after := e.membersApp("after.yaml", "two", "  c:\n    payload: p\n    network: default\n    depends_on: [a]\n")
	out, err = e.gcompose(ctx, "plan", "-f", after)
	t.Logf("plan, c after a's rebuild:\n%s", out)
	if err != nil || !strings.Contains(out, "("+oldA+"), at the price of services.a's rental, which services.a's rebuild ends") {
		t.Fatalf("the plan does not price c at the provider a's rebuild frees (%v):\n%s", err, out)
	}
	out = e.must(ctx, "deploy", "-f", after, "--yes")
	a, b, c := e.field(ctx, "services.a", "provider_id"), e.field(ctx, "services.b", "provider_id"), e.field(ctx, "services.c", "provider_id")
	t.Logf("deploy (a on %s, b on %s, c on %s; a was on %s):\n%s", a, b, c, oldA, out)
	if a == oldA || b != oldB || c != oldA {
		t.Fatalf("a on %s (was %s), b on %s (was %s), c on %s: want a moved, b kept, c on a's old provider", a, oldA, b, oldB, c)
	}
	e.must(ctx, "destroy", "-f", after, "--yes")
	t.Logf("first deploy %.1f s, the whole test %.1f s", deployed.Seconds(), time.Since(began).Seconds())
}
