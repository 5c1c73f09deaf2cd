package reconcile

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
)

func etcdClient(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// awaitCandidates waits until the election's candidates (their values
// under key, in the order they lead) are want: a candidate is campaigning
// once its key is there, whatever the machine's speed.
func awaitCandidates(t *testing.T, cli *clientv3.Client, key string, want ...string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		resp, err := cli.Get(context.Background(), key+"/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatalf("reading the candidates of %s: %v", key, err)
		}
		got = got[:0]
		for _, kv := range resp.Kvs {
			got = append(got, string(kv.Value))
		}
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("candidates of %s: %q after 30s, want %q", key, got, want)
}

type campaign struct {
	term Term
	err  error
	at   time.Time
}

func campaignAsync(ctx context.Context, e Elector) chan campaign {
	ch := make(chan campaign, 1)
	go func() {
		t, err := e.Campaign(ctx)
		ch <- campaign{t, err, time.Now()}
	}()
	return ch
}

// TestElectionFailsOverWhenTheLeaderDies: one of two candidates leads; the
// other waits; when the leader stops renewing its lease (its client gone,
// as a killed process's), the other leads once the lease expires, and the
// old leader's term ends.
func TestElectionFailsOverWhenTheLeaderDies(t *testing.T) {
	c := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	key := ElectionKey("/t", "shop")
	cliA := etcdClient(t, c)
	a := &EtcdElector{Client: cliA, Key: key, TTL: ttl, Holder: "a"}
	b := &EtcdElector{Client: etcdClient(t, c), Key: key, TTL: ttl, Holder: "b"}

	termA, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(termA.Describe(), "TTL 2s") {
		t.Fatalf("term: %s", termA.Describe())
	}
	chB := campaignAsync(ctx, b)
	admin := etcdClient(t, c)
	awaitCandidates(t, admin, key, "a", "b")
	select {
	case got := <-chB:
		t.Fatalf("b leads while a does: %+v", got)
	default:
	}
	killed := time.Now()
	cliA.Close() // no keepalive, no revoke: a dead process
	got := <-chB
	if got.err != nil {
		t.Fatal(got.err)
	}
	took := got.at.Sub(killed)
	t.Logf("b leads %s after a's client died (TTL %s)", took.Round(time.Millisecond), ttl)
	// etcd counts a lease's TTL from its last renewal, up to a third of it
	// before the kill, and checks expiry every 500 ms.
	if took > ttl+2*time.Second {
		t.Fatalf("b took %s to lead, more than the TTL %s and the expiry check", took, ttl)
	}
	select {
	case <-termA.Done():
	case <-time.After(ttl):
		t.Fatal("a's term did not end with its client")
	}
	if err := got.term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestElectionResignHandsOverAtOnce: a leader that stops (resigns) lets the
// next candidate lead without waiting for the TTL.
func TestElectionResignHandsOverAtOnce(t *testing.T) {
	c := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := ElectionKey("/t", "shop")
	a := &EtcdElector{Client: etcdClient(t, c), Key: key, TTL: 30 * time.Second, Holder: "a"}
	b := &EtcdElector{Client: etcdClient(t, c), Key: key, TTL: 30 * time.Second, Holder: "b"}
	termA, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chB := campaignAsync(ctx, b)
	admin := etcdClient(t, c)
	awaitCandidates(t, admin, key, "a", "b")
	resigned := time.Now()
	if err := termA.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-chB:
		if got.err != nil {
			t.Fatal(got.err)
		}
		t.Logf("b leads %s after a resigned", got.at.Sub(resigned).Round(time.Millisecond))
		_ = got.term.Resign(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("b does not lead 10s after a resigned (TTL 30s)")
	}
	// A candidate that gives up (its context ends while it waits) leaves
	// no key behind: once the leader resigns, the next candidate leads at
	// once, not after the quitter's 30 s lease.
	lead, err := (&EtcdElector{Client: etcdClient(t, c), Key: key, TTL: 30 * time.Second, Holder: "l"}).Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithCancel(ctx)
	defer dcancel()
	chD := campaignAsync(dctx, &EtcdElector{Client: etcdClient(t, c), Key: key, TTL: 30 * time.Second, Holder: "d"})
	awaitCandidates(t, admin, key, "l", "d")
	dcancel()
	select {
	case got := <-chD:
		if got.err == nil {
			t.Fatalf("d leads while l does: %s", got.term.Describe())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("d's campaign did not end 10s after its context did")
	}
	awaitCandidates(t, admin, key, "l")
	if err := lead.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
	defer ccancel()
	termC, err := (&EtcdElector{Client: etcdClient(t, c), Key: key, TTL: 30 * time.Second, Holder: "c"}).Campaign(cctx)
	if err != nil {
		t.Fatalf("c does not lead after l resigned and d gave up: %v", err)
	}
	_ = termC.Resign(ctx)
}

// etcdStore opens the etcd state backend as a process of its own would.
func etcdStore(t *testing.T, c *etcdtest.Cluster, ttl time.Duration) *etcd.Store {
	t.Helper()
	s, err := etcd.New(context.Background(), etcd.Config{Endpoints: c.Endpoints(), Prefix: "/t", LockTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestFencedLeaderCannotWrite: leader a is in the middle of a repair (its
// create running) when its leases expire, as a process paused for longer
// than the TTL: b leads, takes the state lock, repairs; when a's create
// returns, its write is refused by the state lock's fence, and the state
// is b's.
func TestFencedLeaderCannotWrite(t *testing.T) {
	c := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	storeA, storeB := etcdStore(t, c, ttl), etcdStore(t, c, ttl)
	a := newBed(t, storeA)
	b := a.sharing(storeB)

	release := make(chan struct{})
	entered := make(chan string, 4)
	a.w.mu.Lock()
	a.w.blockFirst, a.w.entered = release, entered
	a.w.mu.Unlock()
	a.w.kill(t, "resources.db")

	evA, evB := &events{}, &events{}
	key := ElectionKey("/t", "shop")
	slow := Backoff{Interval: 200 * time.Millisecond, Max: time.Second}
	ra := a.reconciler(Config{Events: evA.add, Backoff: slow, Grace: time.Minute,
		Elector: &EtcdElector{Client: storeA.Client(), Key: key, TTL: ttl, Holder: "a"}})
	rb := b.reconciler(Config{Events: evB.add, Backoff: slow, Grace: time.Minute,
		Elector: &EtcdElector{Client: storeB.Client(), Key: key, TTL: ttl, Holder: "b"}})
	stop, stopAll := context.WithCancel(ctx)
	defer stopAll()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- ra.Run(ctx, stop) }()
	select {
	case name := <-entered:
		if name != "resources.db" {
			t.Fatalf("a creates %s", name)
		}
	case <-ctx.Done():
		t.Fatal("a never started to repair db")
	}
	go func() { doneB <- rb.Run(ctx, stop) }()

	// a's leases expire: its election key and its state lock go.
	admin := etcdClient(t, c)
	leases, err := admin.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lockKV, err := admin.Get(ctx, "/t/apps/shop/lock")
	if err != nil || len(lockKV.Kvs) != 1 {
		t.Fatalf("a holds no state lock: %v %v", lockKV, err)
	}
	elected, err := admin.Get(ctx, key, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(elected.Kvs) == 0 || string(elected.Kvs[0].Value) != "a" {
		t.Fatalf("a is not the elected leader: %v %v", elected, err)
	}
	for _, id := range []int64{lockKV.Kvs[0].Lease, elected.Kvs[0].Lease} {
		if _, err := admin.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
			t.Fatalf("revoking a's lease %x: %v (leases: %v)", id, err, leases.Leases)
		}
	}

	// b leads and repairs while a's create still runs.
	deadline := time.Now().Add(30 * time.Second)
	for metric(t, rb, "gcompose_reconcile_repairs_total", "result", "repaired") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("b did not repair within 30s; its events: %+v", evB.all)
		}
		time.Sleep(50 * time.Millisecond)
	}
	docB, err := storeB.Load(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	idB, _ := docB.Resources["resources.db"].Identity["id"].(string)
	if idB == "" || a.w.live("resources.db") == "" {
		t.Fatalf("after b's repair db is %+v", docB.Resources["resources.db"])
	}

	// a's create ends now: its write must be refused.
	close(release)
	deadline = time.Now().Add(30 * time.Second)
	for {
		if e := evA.last(PhaseRepairStopped); e != nil {
			if !strings.Contains(e.Message, state.ErrLockNotHeld.Error()) {
				t.Fatalf("a's repair failed otherwise: %s", e.Message)
			}
			t.Logf("a's repair, fenced: %s", e.Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's repair did not end; its events: %+v", evA.all)
		}
		time.Sleep(50 * time.Millisecond)
	}
	doc, err := storeA.Load(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := doc.Resources["resources.db"].Identity["id"].(string); id != idB {
		t.Fatalf("db's identity is %q after a's late write, want b's %q", id, idB)
	}
	for metric(t, ra, "gcompose_reconcile_leader") != 0 || metric(t, rb, "gcompose_reconcile_leader") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("a still leads, or b does not")
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopAll()
	for _, ch := range []chan error{doneA, doneB} {
		if err := <-ch; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
}
