// Package statetest is the conformance suite every state.Store backend
// passes: the file, memory and etcd backends. A backend's test
// calls Run with a function that returns a fresh, empty store.
package statetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
)

// Open returns a new empty store; reopen, when not nil, returns another
// store over the same storage (a second process, or the same after a restart).
type Open func(t *testing.T) (s state.Store, reopen func(t *testing.T) state.Store)

// Features say how a backend differs where the Store contract lets it.
type Features struct {
	// ForceUnlockLive: ForceUnlock takes a lock from a holder that is still
	// alive (etcd, memory). The file backend cannot: the OS holds its lock
	// until the holder ends, and ForceUnlock refuses.
	ForceUnlockLive bool
}

// Run runs the conformance suite for a backend whose ForceUnlock takes a
// lock from a live holder.
func Run(t *testing.T, open Open) { RunWith(t, open, Features{ForceUnlockLive: true}) }

// RunWith runs the conformance suite.
func RunWith(t *testing.T, open Open, f Features) {
	forceUnlock := testForceUnlock
	if !f.ForceUnlockLive {
		forceUnlock = testForceUnlockRefusedLive
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s state.Store, reopen func(t *testing.T) state.Store)
	}{
		{"EmptyLoad", testEmptyLoad},
		{"ApplyLoad", testApplyLoad},
		{"Copies", testCopies},
		{"SerialAndLineage", testSerialLineage},
		{"Compact", testCompact},
		{"Reopen", testReopen},
		{"InvalidChange", testInvalidChange},
		{"EmptyApply", testEmptyApply},
		{"LockedMessage", testLockedMessage},
		{"ConcurrentLockers", testConcurrentLockers},
		{"ConcurrentApply", testConcurrentApply},
		{"UnlockThenWrite", testUnlockThenWrite},
		{"ForceUnlock", forceUnlock},
		{"LockScope", testLockScope},
		{"AcquireWaits", testAcquireWaits},
		{"AcquireTimeout", testAcquireTimeout},
		{"Replace", testReplace},
		{"Apps", testApps},
		{"Ledger", testLedger},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, reopen := open(t)
			tc.fn(t, s, reopen)
		})
	}
}

// Res returns a sample resource.
func Res(name string, n int) *state.Resource {
	return &state.Resource{
		Name:    name,
		Type:    "gcompose/file-adapter:dev",
		ImageID: "sha256:0123",
		Status:  state.StatusActive,
		Config:  map[string]any{"path": "/data/" + name, "n": float64(n), "tags": []any{"a", map[string]any{"k": "v"}}},
		State:   map[string]any{"size": float64(n)},
		Identity: map[string]any{
			"agreement_id": fmt.Sprintf("agr-%s-%d", name, n),
		},
		Dependencies: []string{"base"},
	}
}

func info(op string) state.LockInfo { return state.NewLockInfo(op, "test") }

// MustLock takes app's lock for a "deploy" or fails the test.
func MustLock(t testing.TB, s state.Store, app string) *state.Lock {
	t.Helper()
	l, err := s.Lock(context.Background(), app, info("deploy"))
	if err != nil {
		t.Fatalf("Lock(%s): %v", app, err)
	}
	return l
}

// MustApply applies changes under l or fails the test.
func MustApply(t testing.TB, s state.Store, l *state.Lock, changes ...state.Change) {
	t.Helper()
	if err := s.Apply(context.Background(), l, changes...); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// MustLoad loads app's document or fails the test.
func MustLoad(t testing.TB, s state.Store, app string) *state.Document {
	t.Helper()
	d, err := s.Load(context.Background(), app)
	if err != nil {
		t.Fatalf("Load(%s): %v", app, err)
	}
	return d
}

func testEmptyLoad(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	d := MustLoad(t, s, "nothing")
	if d.Serial != 0 || d.Lineage != "" || len(d.Resources) != 0 || d.App != "nothing" || d.Resources == nil {
		t.Fatalf("empty load = %+v", d)
	}
	if i, err := s.LockInfo(context.Background(), "nothing"); err != nil || i != nil {
		t.Fatalf("LockInfo of an unlocked app = %v, %v", i, err)
	}
}

func testApplyLoad(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	MustApply(t, s, l, state.Put(Res("a", 1)), state.Put(Res("b", 2)))
	op := state.NewOperation(state.OpCreate, "create", l)
	if op.ID == "" || op.Holder != l.Info.Holder || op.LockID != l.Info.ID || op.StartedAt.IsZero() {
		t.Fatalf("NewOperation = %+v", op)
	}
	c := Res("c", 3)
	c.Status = state.StatusPending
	c.Pending = op
	MustApply(t, s, l, state.Put(c))
	MustApply(t, s, l, state.Delete("b"))
	d := MustLoad(t, s, "app")
	if got := strings.Join(d.Names(), ","); got != "a,c" {
		t.Fatalf("resources = %s, want a,c", got)
	}
	if d.Serial != 3 {
		t.Fatalf("serial = %d, want 3", d.Serial)
	}
	if d.Resources["a"].Identity["agreement_id"] != "agr-a-1" || d.Resources["a"].Config["tags"].([]any)[1].(map[string]any)["k"] != "v" {
		t.Fatalf("resource a = %+v", d.Resources["a"])
	}
	p := d.PendingResources()
	if len(p) != 1 || p[0].Name != "c" || p[0].Pending.ID != op.ID || p[0].Pending.Kind != state.OpCreate || !p[0].Pending.StartedAt.Equal(op.StartedAt) {
		t.Fatalf("pending = %+v", p)
	}
	if d.Resources["a"].UpdatedAt.IsZero() || d.UpdatedAt.IsZero() {
		t.Fatalf("UpdatedAt not set")
	}
	// Clearing the pending operation.
	c.Pending = nil
	c.Status = state.StatusActive
	MustApply(t, s, l, state.Put(c))
	if d := MustLoad(t, s, "app"); len(d.PendingResources()) != 0 || d.Serial != 4 {
		t.Fatalf("after clearing: pending %v serial %d", d.PendingResources(), d.Serial)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
}

func testCopies(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	l := MustLock(t, s, "app")
	r := Res("a", 1)
	MustApply(t, s, l, state.Put(r))
	r.Config["path"] = "changed after apply"
	d := MustLoad(t, s, "app")
	if d.Resources["a"].Config["path"] != "/data/a" {
		t.Fatalf("Apply kept a reference to the caller's resource")
	}
	d.Resources["a"].Config["tags"].([]any)[1].(map[string]any)["k"] = "changed after load"
	d.Resources["x"] = Res("x", 1)
	d2 := MustLoad(t, s, "app")
	if d2.Resources["a"].Config["tags"].([]any)[1].(map[string]any)["k"] != "v" || d2.Resources["x"] != nil {
		t.Fatalf("Load returned shared data")
	}
}

func testSerialLineage(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	MustApply(t, s, l, state.Put(Res("a", 1)))
	d1 := MustLoad(t, s, "app")
	if d1.Lineage == "" || d1.Serial != 1 || d1.FormatVersion != state.FormatVersion {
		t.Fatalf("after first write: lineage %q serial %d format %d", d1.Lineage, d1.Serial, d1.FormatVersion)
	}
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	l = MustLock(t, s, "app")
	MustApply(t, s, l, state.Put(Res("b", 1)))
	d2 := MustLoad(t, s, "app")
	if d2.Lineage != d1.Lineage || d2.Serial != 2 {
		t.Fatalf("second run: lineage %q (was %q) serial %d", d2.Lineage, d1.Lineage, d2.Serial)
	}
	// Another app has its own lineage.
	l2 := MustLock(t, s, "other")
	MustApply(t, s, l2, state.Put(Res("a", 1)))
	if o := MustLoad(t, s, "other"); o.Lineage == d1.Lineage || o.Serial != 1 {
		t.Fatalf("other app: lineage %q serial %d", o.Lineage, o.Serial)
	}
}

func testCompact(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	for i := range 20 {
		MustApply(t, s, l, state.Put(Res(fmt.Sprintf("r%02d", i), i)))
	}
	MustApply(t, s, l, state.Delete("r05"))
	before := MustLoad(t, s, "app")
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	after := MustLoad(t, s, "app")
	if after.Serial != before.Serial || after.Lineage != before.Lineage || len(after.Resources) != 19 {
		t.Fatalf("compaction changed the state: serial %d→%d, %d resources", before.Serial, after.Serial, len(after.Resources))
	}
	// Compacting twice, and writing after a compaction.
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	MustApply(t, s, l, state.Put(Res("r05", 5)))
	if d := MustLoad(t, s, "app"); d.Serial != before.Serial+1 || len(d.Resources) != 20 {
		t.Fatalf("after compaction + apply: serial %d, %d resources", d.Serial, len(d.Resources))
	}
}

func testReopen(t *testing.T, s state.Store, reopen func(*testing.T) state.Store) {
	if reopen == nil {
		t.Skip("backend is not persistent")
	}
	ctx := context.Background()
	l := MustLock(t, s, "app")
	MustApply(t, s, l, state.Put(Res("a", 1)))
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	MustApply(t, s, l, state.Put(Res("b", 2))) // journaled only
	want := MustLoad(t, s, "app")
	s2 := reopen(t)
	got := MustLoad(t, s2, "app")
	if got.Serial != want.Serial || got.Lineage != want.Lineage || strings.Join(got.Names(), ",") != "a,b" {
		t.Fatalf("reopened: serial %d lineage %s names %v; want %d %s a,b", got.Serial, got.Lineage, got.Names(), want.Serial, want.Lineage)
	}
	// The other store sees the lock, and cannot take it.
	if _, err := s2.Lock(ctx, "app", info("destroy")); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("second store locked a held app: %v", err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	l2 := MustLock(t, s2, "app")
	MustApply(t, s2, l2, state.Put(Res("c", 3)))
	if d := MustLoad(t, s, "app"); d.Serial != want.Serial+1 || len(d.Resources) != 3 {
		t.Fatalf("first store after second wrote: serial %d, %d resources", d.Serial, len(d.Resources))
	}
}

func testInvalidChange(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	l := MustLock(t, s, "app")
	for _, ch := range []state.Change{{}, state.Put(&state.Resource{}), {Put: Res("a", 1), Delete: "b"}} {
		if err := s.Apply(context.Background(), l, ch); err == nil {
			t.Errorf("Apply(%+v) accepted", ch)
		}
	}
	if d := MustLoad(t, s, "app"); d.Serial != 0 {
		t.Fatalf("a refused change was written: serial %d", d.Serial)
	}
	if err := s.Apply(context.Background(), nil, state.Put(Res("a", 1))); err == nil {
		t.Fatalf("Apply without a lock accepted")
	}
}

func testLockedMessage(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "x")
	_, err := s.Lock(ctx, "x", info("destroy"))
	var le *state.LockedError
	if !errors.As(err, &le) || !errors.Is(err, state.ErrLocked) {
		t.Fatalf("second Lock: %v, want a *LockedError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`state for app "x" is locked by ` + l.Info.Who(),
		" for deploy since " + l.Info.Created.UTC().Format(time.RFC3339),
		fmt.Sprintf("; lock ID %s; ", l.Info.ID),
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if le.Hint == "" || !strings.HasSuffix(msg, le.Hint) {
		t.Errorf("message %q does not end with a hint saying how the lock ends (%q)", msg, le.Hint)
	}
	i, err := s.LockInfo(ctx, "x")
	if err != nil || i == nil || i.ID != l.Info.ID || i.Operation != "deploy" || i.Holder != l.Info.Holder {
		t.Fatalf("LockInfo = %+v, %v", i, err)
	}
}

func testConcurrentLockers(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	const n = 8
	var wins atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Lock(ctx, "app", info("deploy")); err == nil {
				wins.Add(1)
			} else {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if wins.Load() != 1 {
		t.Fatalf("%d lockers won, want 1", wins.Load())
	}
	for err := range errs {
		if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "lock ID ") {
			t.Errorf("loser's error: %v", err)
		}
	}
}

func testConcurrentApply(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	l := MustLock(t, s, "app")
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Apply(context.Background(), l, state.Put(Res(fmt.Sprintf("r%d", i), i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if d := MustLoad(t, s, "app"); d.Serial != n || len(d.Resources) != n {
		t.Fatalf("serial %d, %d resources; want %d", d.Serial, len(d.Resources), n)
	}
}

func testUnlockThenWrite(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, l, state.Put(Res("a", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("Apply after Unlock: %v, want ErrLockNotHeld", err)
	}
	if err := s.Unlock(ctx, l); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrLockNotHeld", err)
	}
	l2 := MustLock(t, s, "app")
	MustApply(t, s, l2, state.Put(Res("a", 1)))
}

func testForceUnlock(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	old := MustLock(t, s, "app")
	MustApply(t, s, old, state.Put(Res("a", 1)))
	if err := s.ForceUnlock(ctx, "app", "not-the-id"); err == nil || !strings.Contains(err.Error(), old.Info.ID) {
		t.Fatalf("ForceUnlock with a wrong ID: %v", err)
	}
	if err := s.ForceUnlock(ctx, "app", old.Info.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.ForceUnlock(ctx, "app", old.Info.ID); err == nil {
		t.Fatalf("ForceUnlock of an unlocked app accepted")
	}
	// The old holder's writes are refused, before and after a new holder.
	if err := s.Apply(ctx, old, state.Put(Res("b", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("Apply after force-unlock: %v, want ErrLockNotHeld", err)
	}
	nl, err := s.Lock(ctx, "app", info("destroy"))
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Apply":   s.Apply(ctx, old, state.Put(Res("b", 1))),
		"Compact": s.Compact(ctx, old),
		"Replace": s.Replace(ctx, old, state.NewDocument("app"), true),
	} {
		if !errors.Is(err, state.ErrLockNotHeld) {
			t.Errorf("%s with a force-unlocked lock: %v, want ErrLockNotHeld", name, err)
		} else if !strings.Contains(err.Error(), nl.Info.ID) {
			t.Errorf("%s error does not name the new holder: %v", name, err)
		}
	}
	MustApply(t, s, nl, state.Delete("a"))
	if d := MustLoad(t, s, "app"); d.Serial != 2 || len(d.Resources) != 0 {
		t.Fatalf("serial %d resources %v", d.Serial, d.Names())
	}
}

// testForceUnlockRefusedLive: a backend whose lock is held for the holder
// by the OS refuses to take it from a live holder, and the holder goes on.
func testForceUnlockRefusedLive(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	old := MustLock(t, s, "app")
	MustApply(t, s, old, state.Put(Res("a", 1)))
	if err := s.ForceUnlock(ctx, "app", "not-the-id"); err == nil || !strings.Contains(err.Error(), old.Info.ID) {
		t.Fatalf("ForceUnlock with a wrong ID: %v", err)
	}
	err := s.ForceUnlock(ctx, "app", old.Info.ID)
	if err == nil || !strings.Contains(err.Error(), "running process") {
		t.Fatalf("ForceUnlock of a live holder: %v, want a refusal", err)
	}
	if _, err := s.Lock(ctx, "app", info("destroy")); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("Lock after a refused ForceUnlock: %v", err)
	}
	MustApply(t, s, old, state.Put(Res("b", 1)))
	if err := s.Unlock(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := s.ForceUnlock(ctx, "app", old.Info.ID); err == nil || !strings.Contains(err.Error(), "not locked") {
		t.Fatalf("ForceUnlock of a released lock: %v", err)
	}
	nl := MustLock(t, s, "app")
	if nl.Previous != nil {
		t.Errorf("a lock released by Unlock is reported as abandoned: %+v", nl.Previous)
	}
	MustApply(t, s, nl, state.Delete("a"))
	if d := MustLoad(t, s, "app"); d.Serial != 3 || strings.Join(d.Names(), ",") != "b" {
		t.Fatalf("serial %d resources %v", d.Serial, d.Names())
	}
}

// testLockScope: every holding of one application's lock, through this
// store or another over the same storage, has the same non-empty Scope;
// another application's lock has another.
func testLockScope(t *testing.T, s state.Store, reopen func(*testing.T) state.Store) {
	ctx := context.Background()
	l1 := MustLock(t, s, "app")
	other := MustLock(t, s, "other")
	if l1.Scope == "" || l1.Scope == other.Scope {
		t.Fatalf("scopes %q and %q", l1.Scope, other.Scope)
	}
	if err := s.Unlock(ctx, l1); err != nil {
		t.Fatal(err)
	}
	s2 := s
	if reopen != nil {
		s2 = reopen(t)
	}
	l2 := MustLock(t, s2, "app")
	if l2.Scope != l1.Scope || l2.Info.ID == l1.Info.ID {
		t.Fatalf("second holding: scope %q ID %s; first: scope %q ID %s", l2.Scope, l2.Info.ID, l1.Scope, l1.Info.ID)
	}
}

func testAcquireWaits(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	released := make(chan time.Time, 1)
	unlocked := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- time.Now()
		unlocked <- s.Unlock(ctx, l)
	}()
	l2, err := state.Acquire(ctx, s, "app", info("deploy"), 20*time.Second)
	// Read the clock before waiting for the release time: read after, it is
	// always later, and a store whose Lock never refuses would pass.
	acquired := time.Now()
	at := <-released
	// Wait for the releasing goroutine: it must not outlive the test.
	if uerr := <-unlocked; uerr != nil {
		t.Errorf("Unlock by the first holder: %v", uerr)
	}
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if acquired.Before(at) {
		t.Fatalf("acquired %s before the release", at.Sub(acquired))
	}
	MustApply(t, s, l2, state.Put(Res("a", 1)))
}

func testAcquireTimeout(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	MustLock(t, s, "app")
	start := time.Now()
	_, err := state.Acquire(ctx, s, "app", info("deploy"), 300*time.Millisecond)
	if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "waited 300ms") {
		t.Fatalf("Acquire past its timeout: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("gave up after %s", d)
	}
	// No timeout: one try.
	if _, err := state.Acquire(ctx, s, "app", info("deploy"), 0); !errors.Is(err, state.ErrLocked) {
		t.Fatalf("Acquire(0): %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := state.Acquire(cctx, s, "app", info("deploy"), time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}
}

func testReplace(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	for i := range 5 {
		MustApply(t, s, l, state.Put(Res(fmt.Sprintf("r%d", i), i)))
	}
	cur := MustLoad(t, s, "app")

	other := state.NewDocument("app")
	other.Lineage = state.NewID()
	other.Serial = 100
	other.Resources["z"] = Res("z", 1)
	if err := s.Replace(ctx, l, other, false); err == nil || !strings.Contains(err.Error(), "lineage") {
		t.Fatalf("Replace with another lineage: %v", err)
	}
	older := cur.Clone()
	older.Serial = 2
	if err := s.Replace(ctx, l, older, false); err == nil || !strings.Contains(err.Error(), "serial") {
		t.Fatalf("Replace with an older serial: %v", err)
	}
	// Same lineage, same serial (a pulled copy pushed back): accepted, serial+1.
	pulled := cur.Clone()
	delete(pulled.Resources, "r0")
	if err := s.Replace(ctx, l, pulled, false); err != nil {
		t.Fatal(err)
	}
	if d := MustLoad(t, s, "app"); d.Serial != cur.Serial+1 || d.Lineage != cur.Lineage || len(d.Resources) != 4 {
		t.Fatalf("after replace: serial %d lineage %s, %d resources", d.Serial, d.Lineage, len(d.Resources))
	}
	// Forced: the other lineage wins, its higher serial is kept.
	if err := s.Replace(ctx, l, other, true); err != nil {
		t.Fatal(err)
	}
	d := MustLoad(t, s, "app")
	if d.Serial != 100 || d.Lineage != other.Lineage || strings.Join(d.Names(), ",") != "z" {
		t.Fatalf("after forced replace: serial %d lineage %s names %v", d.Serial, d.Lineage, d.Names())
	}
	// Journaled writes continue from there.
	MustApply(t, s, l, state.Put(Res("y", 1)))
	if d := MustLoad(t, s, "app"); d.Serial != 101 || d.Lineage != other.Lineage || len(d.Resources) != 2 {
		t.Fatalf("apply after replace: serial %d, %d resources", d.Serial, len(d.Resources))
	}
	// Forced with a lower serial: the serial still increases.
	if err := s.Replace(ctx, l, older, true); err != nil {
		t.Fatal(err)
	}
	if d := MustLoad(t, s, "app"); d.Serial != 102 || d.Lineage != cur.Lineage {
		t.Fatalf("forced older: serial %d lineage %s", d.Serial, d.Lineage)
	}
}

func testApps(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	if apps, err := s.Apps(ctx); err != nil || len(apps) != 0 {
		t.Fatalf("Apps of an empty store = %v, %v", apps, err)
	}
	for _, app := range []string{"web", "db", "idle"} {
		l := MustLock(t, s, app)
		if app != "idle" {
			MustApply(t, s, l, state.Put(Res("a", 1)))
		}
		if app == "db" {
			if err := s.Compact(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	apps, err := s.Apps(ctx)
	if err != nil || strings.Join(apps, ",") != "db,web" {
		t.Fatalf("Apps = %v, %v; want db,web", apps, err)
	}
}

func testEmptyApply(t *testing.T, s state.Store, _ func(*testing.T) state.Store) {
	ctx := context.Background()
	l := MustLock(t, s, "app")
	MustApply(t, s, l)
	if d := MustLoad(t, s, "app"); d.Serial != 0 || d.Lineage != "" {
		t.Fatalf("an empty Apply wrote: serial %d", d.Serial)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, l); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("empty Apply with a released lock: %v", err)
	}
}

// testLedger: a removed resource's spend stays in the document's ledger
// (what the delete carried; a plain delete keeps nothing), across a
// reopen, and an empty state keeps it: what an application spent outlives
// its destroy.
func testLedger(t *testing.T, s state.Store, reopen func(t *testing.T) state.Store) {
	l := MustLock(t, s, "app")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b, c := Res("a", 1), Res("b", 2), Res("c", 3)
	a.Spent = &state.Spent{Amount: "0.5", Currency: "EUR", At: at}
	b.Spent = &state.Spent{Amount: "1", Currency: "USD", At: at}
	MustApply(t, s, l, state.Put(a), state.Put(b), state.Put(c))
	MustApply(t, s, l, state.DeleteSpent("a", &state.Spent{Amount: "0.75", Currency: "EUR", Due: "0.01", At: at}))
	MustApply(t, s, l, state.DeleteSpent("b", b.Spent), state.Delete("c"))
	check := func(d *state.Document) {
		t.Helper()
		if len(d.Resources) != 0 || len(d.Ledger) != 2 {
			t.Fatalf("resources %v, ledger %+v: want none and a, b", d.Names(), d.Ledger)
		}
		if e := d.Ledger[0]; e.Resource != "a" || e.Spent.Amount != "0.75" || e.Spent.Due != "0.01" || e.EndedAt.IsZero() {
			t.Fatalf("ledger[0] = %+v: want a's spend as its delete carried it", e)
		}
		if e := d.Ledger[1]; e.Resource != "b" || e.Spent.Amount != "1" || e.Spent.Currency != "USD" || !e.Spent.At.Equal(at) {
			t.Fatalf("ledger[1] = %+v: want b's spend", e)
		}
	}
	check(MustLoad(t, s, "app"))
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if reopen != nil {
		check(MustLoad(t, reopen(t), "app"))
	}
}
