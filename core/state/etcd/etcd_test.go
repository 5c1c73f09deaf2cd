package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
)

func lockInfo(op string) state.LockInfo { return state.NewLockInfo(op, "test") }

// waitUnlocked polls until app has no lock, failing after limit.
func waitUnlocked(t *testing.T, s state.Store, app string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		i, err := s.LockInfo(context.Background(), app)
		if err != nil {
			t.Fatal(err)
		}
		if i == nil {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("lock %s still there after %s", i.ID, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor polls cond until it holds, failing after limit with what was
// awaited: a stall fails the test at once, naming what it waited for,
// rather than hanging until the global test timeout.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
	}
}

// shortTTL is the lease of the expiry tests: short enough that they do not
// wait long, long enough that a keepalive delayed by a loaded 2-core machine
// does not lose a lease the test expects to be kept (1s did not leave that
// margin).
const shortTTL = 2 * time.Second

// A holder whose lease expired (it stopped renewing it: hung, partitioned)
// loses the lock: its writes are refused, and another holder can lock.
func TestLeaseExpired(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	short := func(cfg *etcd.Config) { cfg.LockTTL = shortTTL }
	a := open(t, c, "/lease", short)
	b := open(t, c, "/lease", short)

	old := statetest.MustLock(t, a, "app")
	statetest.MustApply(t, a, old, state.Put(statetest.Res("x", 1)))
	a.StopKeepAlive(old)
	took := waitUnlocked(t, b, "app", 10*time.Second)
	t.Logf("lock expired %s after the keepalive stopped (TTL %s)", took.Round(10*time.Millisecond), shortTTL)

	if err := a.Apply(ctx, old, state.Put(statetest.Res("y", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("Apply after the lease expired: %v, want ErrLockNotHeld", err)
	}
	nl := statetest.MustLock(t, b, "app")
	for name, err := range map[string]error{
		"Apply":   a.Apply(ctx, old, state.Put(statetest.Res("y", 1))),
		"Empty":   a.Apply(ctx, old),
		"Compact": a.Compact(ctx, old),
		"Replace": a.Replace(ctx, old, state.NewDocument("app"), true),
		"Remove":  a.Remove(ctx, old),
		"Unlock":  a.Unlock(ctx, old),
	} {
		if !errors.Is(err, state.ErrLockNotHeld) || !strings.Contains(err.Error(), nl.Info.ID) {
			t.Errorf("%s by the expired holder: %v, want ErrLockNotHeld naming %s", name, err, nl.Info.ID)
		}
	}
	statetest.MustApply(t, b, nl, state.Put(statetest.Res("z", 1)))
	if d := statetest.MustLoad(t, a, "app"); strings.Join(d.Names(), ",") != "x,z" || d.Serial != 2 {
		t.Fatalf("state = %v serial %d; want x,z serial 2", d.Names(), d.Serial)
	}
	// The new holder is renewed: it outlives several TTLs.
	time.Sleep(3 * shortTTL)
	statetest.MustApply(t, b, nl, state.Delete("z"))
	if err := b.Unlock(ctx, nl); err != nil {
		t.Fatal(err)
	}
}

// A store closed without unlocking (a crashed gcompose) leaves a lock that
// expires with its lease.
func TestCrashedHolderExpires(t *testing.T) {
	c := etcdtest.Start(t)
	short := func(cfg *etcd.Config) { cfg.LockTTL = shortTTL }
	a := open(t, c, "/crash", short)
	b := open(t, c, "/crash", short)
	statetest.MustLock(t, a, "app")
	if _, err := b.Lock(context.Background(), "app", lockInfo("deploy")); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("second Lock: %v", err)
	}
	if ttl, err := b.LeaseTTL(context.Background(), "app"); err != nil || ttl < 0 || ttl > shortTTL {
		t.Fatalf("LeaseTTL = %s, %v", ttl, err)
	}
	a.Close()
	waitUnlocked(t, b, "app", 10*time.Second)
	l := statetest.MustLock(t, b, "app")
	statetest.MustApply(t, b, l, state.Put(statetest.Res("a", 1)))
}

// Force-unlock from another client: the old holder's writes are refused,
// before and after someone else takes the lock.
func TestForceUnlockOtherClient(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	a := open(t, c, "/force")
	b := open(t, c, "/force")
	old := statetest.MustLock(t, a, "app")
	statetest.MustApply(t, a, old, state.Put(statetest.Res("x", 1)))
	i, err := b.LockInfo(ctx, "app")
	if err != nil || i == nil || i.ID != old.Info.ID || i.Operation != "deploy" || i.Holder != old.Info.Holder || !i.Created.Equal(old.Info.Created) {
		t.Fatalf("LockInfo from the other client = %+v, %v", i, err)
	}
	if err := b.ForceUnlock(ctx, "app", old.Info.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(ctx, old, state.Put(statetest.Res("y", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("Apply after force-unlock: %v", err)
	}
	nl := statetest.MustLock(t, b, "app")
	if err := a.Apply(ctx, old, state.Put(statetest.Res("y", 1))); !errors.Is(err, state.ErrLockNotHeld) || !strings.Contains(err.Error(), nl.Info.ID) {
		t.Fatalf("Apply after force-unlock and relock: %v", err)
	}
	statetest.MustApply(t, b, nl, state.Put(statetest.Res("z", 1)))
	if d := statetest.MustLoad(t, a, "app"); strings.Join(d.Names(), ",") != "x,z" {
		t.Fatalf("names = %v", d.Names())
	}
}

// Lockers from two clients, several goroutines each, take turns: each turn
// reads the counter and writes it plus one. No turn overlaps another (the
// counter is exact) and every loser's error is a LockedError.
func TestConcurrentLockersTwoClients(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	stores := []*etcd.Store{open(t, c, "/turns"), open(t, c, "/turns")}
	// One round: everybody at once, exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := stores[i%2].Lock(ctx, "race", lockInfo("deploy"))
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, state.ErrLocked):
				t.Errorf("loser: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d lockers won, want 1", wins.Load())
	}
	// Turns.
	const workers, turns = 6, 5
	var inside atomic.Int32
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for range turns {
				l, err := state.Acquire(ctx, s, "turns", lockInfo("deploy"), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("%d holders at once", n)
				}
				d, err := s.Load(ctx, "turns")
				if err != nil {
					t.Error(err)
				}
				n := 0
				if r := d.Resources["counter"]; r != nil {
					n = int(r.State["n"].(float64))
				}
				r := statetest.Res("counter", n+1)
				r.State["n"] = float64(n + 1)
				if err := s.Apply(ctx, l, state.Put(r)); err != nil {
					t.Error(err)
				}
				inside.Add(-1)
				if err := s.Unlock(ctx, l); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	d := statetest.MustLoad(t, stores[0], "turns")
	if got := d.Resources["counter"].State["n"]; got != float64(workers*turns) || d.Serial != workers*turns {
		t.Fatalf("counter %v serial %d, want %d", got, d.Serial, workers*turns)
	}
}

func leader(t *testing.T, cli *clientv3.Client, c *etcdtest.Cluster) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for i, m := range c.Members {
			if !m.Running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := cli.Status(ctx, m.ClientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				return i
			}
		}
	}
	t.Fatal("no leader")
	return -1
}

// A three-member cluster loses its leader in the middle of a deploy (a
// sequence of Applies from parallel workers): every Apply completes (the
// client fails over), the lock is still held, and the state is consistent
// on every member, including the stopped one once it is back.
func TestClusterMemberStopped(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.StartCluster(t, 3)
	s := open(t, c, "/cluster", func(cfg *etcd.Config) { cfg.LockTTL = 15 * time.Second })
	l := statetest.MustLock(t, s, "app")
	const workers, each = 4, 40
	var done atomic.Int32
	killed := make(chan int, 1)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				name := fmt.Sprintf("w%d-r%02d", w, i)
				r := statetest.Res(name, i)
				r.Status = state.StatusPending
				r.Pending = state.NewOperation(state.OpCreate, "create", l)
				if err := s.Apply(ctx, l, state.Put(r)); err != nil {
					t.Errorf("apply %s (pending): %v", name, err)
					return
				}
				r.Status, r.Pending = state.StatusActive, nil
				if err := s.Apply(ctx, l, state.Put(r)); err != nil {
					t.Errorf("apply %s (done): %v", name, err)
					return
				}
				if done.Add(1) == workers*each/3 {
					m := leader(t, s.Client(), c)
					c.Members[m].Kill()
					killed <- m
				}
			}
		}()
	}
	wg.Wait()
	m := <-killed
	t.Logf("killed %s (the leader) after %d of %d resources; %d requests retried", c.Members[m].Name, workers*each/3, workers*each, s.Stats().Retries)
	if t.Failed() {
		return
	}
	check := func(st state.Store, who string) {
		t.Helper()
		d := statetest.MustLoad(t, st, "app")
		if d.Serial != 2*workers*each || len(d.Resources) != workers*each || len(d.PendingResources()) != 0 {
			t.Fatalf("%s: serial %d, %d resources, %d pending; want %d, %d, 0", who, d.Serial, len(d.Resources), len(d.PendingResources()), 2*workers*each, workers*each)
		}
	}
	check(s, "after the deploy")
	if i, err := s.LockInfo(ctx, "app"); err != nil || i == nil || i.ID != l.Info.ID {
		t.Fatalf("lock after failover: %+v, %v", i, err)
	}
	statetest.MustApply(t, s, l, state.Delete("w0-r00"))
	c.Members[m].Restart(t)
	// The restarted member alone: it caught up.
	solo, err := etcd.New(ctx, etcd.Config{Endpoints: []string{c.Members[m].ClientURL}, Prefix: "/cluster"})
	if err != nil {
		t.Fatal(err)
	}
	defer solo.Close()
	d := statetest.MustLoad(t, solo, "app")
	if d.Serial != 2*workers*each+1 || len(d.Resources) != workers*each-1 {
		t.Fatalf("restarted member: serial %d, %d resources", d.Serial, len(d.Resources))
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
}

// A document of 10,000 resources: written in one Apply (a new generation in
// batches) and by Replace, read back by Load; no request or response comes
// near etcd's 1.5 MiB limit.
func TestLargeDocument(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s := open(t, c, "/large")
	l := statetest.MustLock(t, s, "app")
	const n = 10000
	changes := make([]state.Change, n)
	for i := range n {
		changes[i] = state.Put(statetest.Res(fmt.Sprintf("svc-%05d", i), i))
	}
	start := time.Now()
	statetest.MustApply(t, s, l, changes...)
	applied := time.Since(start)
	statetest.MustApply(t, s, l, state.Delete("svc-00000"), state.Put(statetest.Res("extra", 1)))
	start = time.Now()
	d := statetest.MustLoad(t, s, "app")
	loaded := time.Since(start)
	if len(d.Resources) != n || d.Serial != 2 || d.Resources["svc-09999"].Config["n"] != float64(9999) {
		t.Fatalf("loaded %d resources, serial %d", len(d.Resources), d.Serial)
	}
	d.Serial = 7
	if err := s.Replace(ctx, l, d, false); err != nil {
		t.Fatal(err)
	}
	if d2 := statetest.MustLoad(t, s, "app"); len(d2.Resources) != n || d2.Serial != 7 {
		t.Fatalf("after replace: %d resources, serial %d", len(d2.Resources), d2.Serial)
	}
	st := s.Stats()
	t.Logf("10,000 resources: one Apply %s, Load %s; %d write transactions, largest %d B; %d read responses, largest %d B",
		applied.Round(time.Millisecond), loaded.Round(time.Millisecond), st.Writes, st.MaxWrite, st.Reads, st.MaxRead)
	if st.MaxWrite > 1<<20 || st.MaxRead > 1<<20 {
		t.Fatalf("a request of %d B or a response of %d B: not small", st.MaxWrite, st.MaxRead)
	}
	// The keys: one per resource, a head and its copy in the generation,
	// the lock; nothing else left over.
	resp, err := s.Client().Get(ctx, "/large/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != n+3 {
		t.Fatalf("%d keys under /large/, want %d", resp.Count, n+3)
	}
	hd, err := s.Client().Get(ctx, "/large/apps/app/head")
	if err != nil || len(hd.Kvs) != 1 || len(hd.Kvs[0].Value) > 512 {
		t.Fatalf("head: %v, %v", hd, err)
	}
	t.Logf("head record: %s", hd.Kvs[0].Value)
}

// Names with slashes and odd characters stay inside their application.
func TestNamesEscaped(t *testing.T) {
	c := etcdtest.Start(t)
	s := open(t, c, "/names")
	for _, app := range []string{"a", "a/res", "a0", "a.b", "ü b"} {
		l := statetest.MustLock(t, s, app)
		statetest.MustApply(t, s, l, state.Put(statetest.Res("x/y", 1)), state.Put(statetest.Res("web[1]", 2)))
	}
	apps, err := s.Apps(context.Background())
	if err != nil || strings.Join(apps, "|") != "a|a.b|a/res|a0|ü b" {
		t.Fatalf("Apps = %q, %v", apps, err)
	}
	if d := statetest.MustLoad(t, s, "a"); strings.Join(d.Names(), ",") != "web[1],x/y" {
		t.Fatalf("names = %v", d.Names())
	}
}

// BenchmarkApplyLoad: 1,000 resources, one Apply each (the pattern of a
// deploy), then a Load, on a single local member.
func BenchmarkApplyLoad(b *testing.B) {
	ctx := context.Background()
	c := etcdtest.Start(b)
	s, err := etcd.New(ctx, etcd.Config{Endpoints: c.Endpoints(), Prefix: "/bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const n = 1000
	for i := 0; b.Loop(); i++ {
		app := fmt.Sprintf("app%d", i)
		l, err := s.Lock(ctx, app, lockInfo("deploy"))
		if err != nil {
			b.Fatal(err)
		}
		for j := range n {
			if err := s.Apply(ctx, l, state.Put(statetest.Res(fmt.Sprintf("r%04d", j), j))); err != nil {
				b.Fatal(err)
			}
		}
		d, err := s.Load(ctx, app)
		if err != nil || len(d.Resources) != n {
			b.Fatalf("load: %d resources, %v", len(d.Resources), err)
		}
		if err := s.Unlock(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/resource")
}

// BenchmarkLoad: Load of a 1,000- and a 10,000-resource document.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	c := etcdtest.Start(b)
	s, err := etcd.New(ctx, etcd.Config{Endpoints: c.Endpoints(), Prefix: "/bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{1000, 10000} {
		app := fmt.Sprintf("app%d", n)
		l, err := s.Lock(ctx, app, lockInfo("deploy"))
		if err != nil {
			b.Fatal(err)
		}
		changes := make([]state.Change, n)
		for i := range n {
			changes[i] = state.Put(statetest.Res(fmt.Sprintf("r%05d", i), i))
		}
		if err := s.Apply(ctx, l, changes...); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				if d, err := s.Load(ctx, app); err != nil || len(d.Resources) != n {
					b.Fatalf("%d resources, %v", len(d.Resources), err)
				}
			}
		})
	}
}

// BenchmarkConcurrentApply: 1,000 resources put by 10 workers under one
// lock (a deploy with --parallelism 10).
func BenchmarkConcurrentApply(b *testing.B) {
	ctx := context.Background()
	c := etcdtest.Start(b)
	s, err := etcd.New(ctx, etcd.Config{Endpoints: c.Endpoints(), Prefix: "/bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const workers, each = 10, 100
	for i := 0; b.Loop(); i++ {
		l, err := s.Lock(ctx, fmt.Sprintf("app%d", i), lockInfo("deploy"))
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range each {
					if err := s.Apply(ctx, l, state.Put(statetest.Res(fmt.Sprintf("w%d-%d", w, j), j))); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*workers*each), "ns/resource")
}

// The only member is killed during a sequence of Applies and restarted a
// second later: the Applies in flight wait and complete (retried; a write
// whose answer was lost is recognised by its write ID, not applied twice),
// and the serial counts every Apply exactly once.
func TestSingleMemberRestart(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s := open(t, c, "/restart", func(cfg *etcd.Config) { cfg.LockTTL = 15 * time.Second })
	l := statetest.MustLock(t, s, "app")
	// The writer applies until told to stop, so Applies are in flight for the
	// whole time the member is down, however fast the machine is.
	stop := make(chan struct{})
	errc := make(chan error, 1)
	var applied atomic.Int64
	// spanned records an Apply that began at least half a second before the
	// restart (the member is down for a second) and ended after it: one
	// that waited for the member. The store's retry counter alone cannot
	// show that: the etcd client retries a request that found no
	// connection by itself, within one attempt (CI saw 0 store retries).
	var restartAt atomic.Int64
	var spanned atomic.Bool
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			began := time.Now().UnixNano()
			if err := s.Apply(ctx, l, state.Put(statetest.Res(fmt.Sprintf("r%05d", i), i))); err != nil {
				errc <- fmt.Errorf("apply %d: %w", i, err)
				return
			}
			if r := restartAt.Load(); r != 0 && began < r-int64(500*time.Millisecond) && time.Now().UnixNano() > r {
				spanned.Store(true)
			}
			applied.Add(1)
		}
	}()
	// writing says whether the writer still runs, failing with its error
	// if it stopped.
	writing := func() bool {
		select {
		case err := <-errc:
			t.Fatalf("the writer stopped: %v", err)
		default:
		}
		return true
	}
	waitFor(t, 30*time.Second, "30 Applies before the kill", func() bool { return writing() && applied.Load() >= 30 })
	c.Members[0].Kill()
	time.Sleep(time.Second)
	restartAt.Store(time.Now().UnixNano())
	c.Members[0].Restart(t)
	before := applied.Load()
	waitFor(t, time.Minute, "10 Applies after the restart", func() bool { return writing() && applied.Load() >= before+10 })
	close(stop)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the writer did not stop within a minute of being told to (an Apply hangs)")
	}
	n := int(applied.Load())
	d := statetest.MustLoad(t, s, "app")
	if d.Serial != uint64(n) || len(d.Resources) != n {
		t.Fatalf("serial %d, %d resources; want %d", d.Serial, len(d.Resources), n)
	}
	t.Logf("%d requests retried by the store while the member was down", s.Stats().Retries)
	if !spanned.Load() {
		t.Fatalf("no Apply was in flight while the member was down")
	}
	statetest.MustApply(t, s, l, state.Delete("r000"))
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
}

// Readers never see half of a write: while a writer replaces a 200-resource
// document again and again (each time in many small batches, since
// transactions are capped at 10 operations) and applies 200 changes at
// once, concurrent Loads (7 resources per page) always see every resource
// at the same version, and the version the serial says.
func TestReadersSeeWholeWrites(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	small := func(cfg *etcd.Config) { cfg.MaxTxnOps = 10; cfg.PageSize = 7 }
	w := open(t, c, "/whole", small)
	r := open(t, c, "/whole", small)
	l := statetest.MustLock(t, w, "app")
	const n = 200
	version := func(v int) *state.Document {
		d := state.NewDocument("app")
		for i := range n {
			res := statetest.Res(fmt.Sprintf("r%03d", i), v)
			d.Resources[res.Name] = res
		}
		return d
	}
	if err := w.Replace(ctx, l, version(0), false); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var loads atomic.Int32
	var wg sync.WaitGroup
	seen := sync.Map{} // serial -> version
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := r.Load(ctx, "app")
				if err != nil {
					t.Error(err)
					return
				}
				loads.Add(1)
				if len(d.Resources) != n {
					t.Errorf("serial %d: %d resources", d.Serial, len(d.Resources))
					return
				}
				v := d.Resources["r000"].Config["n"]
				for _, res := range d.Resources {
					if res.Config["n"] != v {
						t.Errorf("serial %d: %s at version %v, r000 at %v: half a write", d.Serial, res.Name, res.Config["n"], v)
						return
					}
				}
				if prev, ok := seen.LoadOrStore(d.Serial, v); ok && prev != v {
					t.Errorf("serial %d seen at versions %v and %v", d.Serial, prev, v)
				}
			}
		}()
	}
	// The readers must be loading before the writes start, or the test
	// checks nothing; and some of their loads must fall during the writes.
	waitFor(t, 30*time.Second, "a reader's first Load", func() bool { return loads.Load() > 0 })
	before := loads.Load()
	for v := 1; v <= 6; v++ {
		if v%2 == 1 {
			d := version(v)
			d.Serial = uint64(1000 * v) // not older
			if err := w.Replace(ctx, l, d, false); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var changes []state.Change
		for _, res := range version(v).Resources {
			changes = append(changes, state.Put(res))
		}
		statetest.MustApply(t, w, l, changes...)
	}
	during := loads.Load() - before
	close(stop)
	wg.Wait()
	if during == 0 {
		t.Fatal("no Load ran while the writes did: nothing was checked")
	}
	t.Logf("%d consistent loads during 6 big writes", during)
	if err := w.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	resp, err := w.Client().Get(ctx, "/whole/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != n+3 {
		t.Fatalf("%d keys after the writes, want %d (resources, head and its copy, lock): %v", resp.Count, n+3, err)
	}
}
