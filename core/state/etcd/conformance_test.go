package etcd_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// testLogger sends the store's log to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// open returns a store on the cluster under prefix, closed with the test.
func open(t *testing.T, c *etcdtest.Cluster, prefix string, tune ...func(*etcd.Config)) *etcd.Store {
	t.Helper()
	cfg := etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix, Logger: testLogger(t), LockTTL: 5 * time.Second}
	for _, f := range tune {
		f(&cfg)
	}
	s, err := etcd.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	c := etcdtest.Start(t)
	statetest.Run(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
		prefix := "/conformance/" + state.NewID()
		reopen := func(t *testing.T) state.Store { return open(t, c, prefix) }
		return reopen(t), reopen
	})
}

// TestConformanceSmallTxns runs the suite with transactions so small that
// every multi-change Apply and every Replace goes through a new generation
// written in several batches.
func TestConformanceSmallTxns(t *testing.T) {
	c := etcdtest.Start(t)
	statetest.Run(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
		prefix := "/small/" + state.NewID()
		reopen := func(t *testing.T) state.Store {
			return open(t, c, prefix, func(cfg *etcd.Config) { cfg.MaxTxnOps = 2; cfg.PageSize = 2 })
		}
		return reopen(t), reopen
	})
}
