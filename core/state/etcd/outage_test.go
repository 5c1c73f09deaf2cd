package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// etcd down for longer than the lock's TTL, then back: a holder that was
// writing resumes soon after, with its lock (etcd renews every lease's TTL
// when it starts again, and the holder must renew it before that runs out),
// and every write lands once. The figure is in docs/state.md.
func TestOutageLongerThanTheLockTTL(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	const ttl = 4 * time.Second
	s := open(t, c, "/outage", func(cfg *etcd.Config) { cfg.LockTTL = ttl })
	l := statetest.MustLock(t, s, "app")
	statetest.MustApply(t, s, l, state.Put(statetest.Res("before", 0)))
	c.Members[0].Kill()
	// A write while etcd is down waits for it.
	done := make(chan error, 1)
	var ended time.Time
	go func() {
		err := s.Apply(ctx, l, state.Put(statetest.Res("during", 1)))
		ended = time.Now()
		done <- err
	}()
	const outage = 12 * time.Second // three TTLs: every keepalive deadline passes
	time.Sleep(outage)
	restarted := time.Now()
	c.Members[0].Restart(t)
	back := time.Now() // etcd answers its health check
	if err := <-done; err != nil {
		t.Fatalf("the write made while etcd was down, %s after it came back: %v", ended.Sub(back), err)
	}
	// Past the TTL after the restart, the lock lives only if it was renewed.
	time.Sleep(ttl + 2*time.Second)
	if err := s.Apply(ctx, l, state.Put(statetest.Res("after", 2))); err != nil {
		t.Fatalf("%s after etcd came back (the lease TTL is %s): %v", time.Since(back), ttl, err)
	}
	d := statetest.MustLoad(t, s, "app")
	if d.Serial != 3 || len(d.Resources) != 3 {
		t.Fatalf("serial %d, resources %v", d.Serial, d.Names())
	}
	t.Logf("etcd down %s (lock TTL %s): restarted, healthy %s later; the pending write completed %s after the restart; the lock was kept",
		outage, ttl, back.Sub(restarted).Round(10*time.Millisecond), ended.Sub(restarted).Round(10*time.Millisecond))
}
