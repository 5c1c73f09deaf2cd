package state_test

import (
	"context"
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

// An appended change is in the journal when Append returns, before its
// fsync: another process (a second store on the directory, as the next
// gcompose run after a kill -9) reads it. durable then makes it durable.
func TestAppendIsReadableBeforeItIsDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	var a state.Appender = s
	durable, err := a.Append(ctx, l, state.Put(&state.Resource{Name: "resources.a", Type: "mem", Status: state.StatusActive}))
	if err != nil {
		t.Fatal(err)
	}
	other, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	doc, err := other.Load(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if r := doc.Resources["resources.a"]; r == nil || r.Status != state.StatusActive || doc.Serial != 1 {
		t.Fatalf("another reader sees %+v at serial %d, want resources.a Active at 1", doc.Resources, doc.Serial)
	}
	if err := durable(); err != nil {
		t.Fatal(err)
	}
	// A later Apply is numbered after it.
	if err := s.Apply(ctx, l, state.Delete("resources.a")); err != nil {
		t.Fatal(err)
	}
	if doc, err = other.Load(ctx, "app"); err != nil || doc.Serial != 2 || len(doc.Resources) != 0 {
		t.Fatalf("after the delete: %+v, %v; want serial 2 and no resources", doc, err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
}
