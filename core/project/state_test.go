package project

import (
	"context"
	"errors"
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

// Push and Move take the state locks themselves and leave none behind;
// a move reads the state back from its target before removing the source.
func TestStatePushAndMove(t *testing.T) {
	ctx := context.Background()
	lk := Locking{Operation: "test", Version: "dev"}
	src := NewState(state.NewMemoryStore(), "mem://src")
	doc := state.NewDocument("app")
	doc.Resources["resources.a"] = &state.Resource{Name: "resources.a", Type: "img", Status: state.StatusActive}
	doc.Serial = 1
	got, err := src.Push(ctx, "app", doc, false, lk)
	if err != nil || len(got.Resources) != 1 || got.Serial == 0 {
		t.Fatalf("push: %+v, %v", got, err)
	}
	if info, err := src.LockInfo(ctx, "app"); err != nil || info != nil {
		t.Fatalf("after push the lock is %+v, %v; want none", info, err)
	}
	dst := NewState(state.NewMemoryStore(), "mem://dst")
	moved, err := src.Move(ctx, dst, "app", false, true, lk)
	if err != nil || moved.Lineage != got.Lineage || len(moved.Resources) != 1 {
		t.Fatalf("move: %+v, %v", moved, err)
	}
	if left, err := src.Load(ctx, "app"); err != nil || left.Serial != 0 {
		t.Fatalf("source after move --remove-source: %+v, %v; want no state", left, err)
	}
	for _, s := range []*State{src, dst} {
		if info, err := s.LockInfo(ctx, "app"); err != nil || info != nil {
			t.Fatalf("after move the lock of %s is %+v, %v; want none", s.Shown(), info, err)
		}
	}
	if _, err := src.Move(ctx, dst, "app", false, false, lk); !errors.Is(err, ErrNoSuchState) {
		t.Fatalf("moving a state that is not there: %v, want ErrNoSuchState", err)
	}
	if _, ok := src.LocalDir(); ok {
		t.Error("a memory store has no local directory")
	}
	if el, err := src.Elector("app", "dev", 0); el != nil || err != nil {
		t.Errorf("a memory store elects no leader: %v, %v", el, err)
	}
	if _, err := src.Recover(ctx, "app", lk, nil); !errors.Is(err, ErrNoRecovery) {
		t.Errorf("recover on a memory store: %v, want ErrNoRecovery", err)
	}
}

// A file state has a local directory (the reconciler's flock goes there),
// and an intact one needs no recovery.
func TestFileStateDirAndRecover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := OpenState(ctx, dir, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if d, ok := st.LocalDir(); !ok || d == "" {
		t.Errorf("LocalDir: %q, %v", d, ok)
	}
	doc := state.NewDocument("app")
	doc.Resources["resources.a"] = &state.Resource{Name: "resources.a", Type: "img", Status: state.StatusActive}
	if _, err := st.Push(ctx, "app", doc, false, Locking{Operation: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recover(ctx, "app", Locking{Operation: "test"}, nil); !errors.Is(err, ErrIntact) {
		t.Errorf("recover of an intact state: %v, want ErrIntact", err)
	}
}

func TestIntent(t *testing.T) {
	p := load(t, workdir(t, "files.yaml", fileAdapterName, nil), nil)
	in, err := p.Intent("other")
	if err != nil || in.App != "other" || len(in.Desired) != 2 || len(in.Outputs) != 2 {
		t.Fatalf("intent: %+v, %v", in, err)
	}
}
