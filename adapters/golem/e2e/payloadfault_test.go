package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/devnet/devnettest"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestPayloadThatCannotStartBlamesNoProvider: an image that cannot start
// (its entrypoint, run by start-entrypoint, does not exist) fails its start the same way on every
// provider. The create stops at the second provider, naming the payload as
// the cause, and no provider is avoided: the old create tried three and
// put all three healthy providers on the failed list for good. The
// agreement it ends last says why (golem.requestor.code PayloadFailure).
func TestPayloadThatCannotStartBlamesNoProvider(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	testimage.RequireDocker(t)
	db := devnettest.DemoImage(t, ctx, "devnet-db", "gcompose-test/devnet-db:e2e", nil)
	broken := testimage.DerivedImage(t, ctx, "FROM "+db+"\nENTRYPOINT [\"/no/such/binary\"]\n", "gcompose-test/devnet-broken:e2e")
	brokenHash := strings.Repeat("ba", 28)
	e := startDevnet(t, devnet.Config{Images: map[string]string{brokenHash: broken}, Providers: []devnet.ProviderConfig{
		{Name: "small", Count: 3, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: []string{"vpn", "inet", "start-entrypoint"}, Coeffs: []float64{0.00005, 0.0001, 0}},
	}})
	alloc := e.allocation(ctx)

	// The image's entrypoint runs at start when the payload asks for
	// start-entrypoint (as ya-runtime-vm runs it): the start fails alike on
	// every provider.
	cfg := serviceConfig("db", brokenHash, alloc, nil, "")
	cfg["payload"].(map[string]any)["capabilities"] = []any{"vpn", "start-entrypoint"}
	svc := e.service("db", fast, cfg)
	e.cleanupService(svc)
	o := svc.action(ctx, "create")
	if o.exit == 0 || !strings.Contains(o.stderr, "payload db-payload cannot start") || !strings.Contains(o.stderr, "no provider is blamed") {
		t.Fatalf("create of an image that cannot start:\n%s", o)
	}
	id := svc.persisted.Identity
	if failed, _ := id["failed_providers"].([]any); len(failed) != 0 {
		t.Errorf("failed providers %v (%v) after the payload's own failure", failed, id["failed_reasons"])
	}
	history, _ := id["agreements"].([]any)
	if len(history) != 2 {
		t.Fatalf("agreements %v: want the create to stop at the second provider failing the same way", history)
	}
	last, _ := history[1].(string)
	ev, err := e.yc.TerminateReason(ctx, last)
	if err != nil || ev.Reason == nil || ev.Reason.Extra["golem.requestor.code"] != "PayloadFailure" {
		t.Errorf("the last agreement's end: %+v %v, want golem.requestor.code PayloadFailure", ev.Reason, err)
	}
}
