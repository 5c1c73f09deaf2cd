package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/protocol"
)

// TestLocalYagnaErrorIsNotAProviderGone: yagna answers the state of a
// live activity with its own database failure, a 500 "DAO error: …"
// (core/activity/src/error.rs Error::Dao), three times. That is the local
// node's error: the state call fails saying so, and no provider is blamed.
// The old state call took every 500 for a provider yagna cannot reach:
// after three tries it reported the service STALE and avoided its healthy
// provider for good.
func TestLocalYagnaErrorIsNotAProviderGone(t *testing.T) {
	parallel(t)
	e := startDevnet(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	db := e.service("db", fast, serviceConfig("db", dbHash, alloc, nil, ""))
	e.cleanupService(db)
	db.mustAct(ctx, "create")

	e.faults(ctx, map[string]any{"daoErrors": 3})
	s := db.state(ctx)
	if s.exit == 0 || !strings.Contains(s.stderr, "DAO error") {
		t.Fatalf("state while yagna fails on its own side: %s", s)
	}
	e.faults(ctx, map[string]any{})
	if s := db.state(ctx); s.exit != 0 || s.state.Status != protocol.Valid {
		t.Fatalf("state once yagna is well: %s, want VALID (no provider blamed)", s)
	}
	if failed, _ := db.persisted.Identity["failed_providers"].([]any); len(failed) != 0 {
		t.Errorf("failed providers %v after yagna's own error", failed)
	}
}
