package project

import (
	"context"
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

// appendingStore is a memory store that counts the writes that wait for
// durability (Apply) and those that do not (Append).
type appendingStore struct {
	*state.MemoryStore
	applies, appends int
}

func (s *appendingStore) Apply(ctx context.Context, l *state.Lock, changes ...state.Change) error {
	s.applies++
	return s.MemoryStore.Apply(ctx, l, changes...)
}

func (s *appendingStore) Append(ctx context.Context, l *state.Lock, changes ...state.Change) (func() error, error) {
	s.appends++
	return func() error { return nil }, s.MemoryStore.Apply(ctx, l, changes...)
}

// A reconciler's store (KeepOpen, guarded as every session's) appends when
// its backend does, and applies when it cannot append.
func TestKeepOpenAppends(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		appends        bool
		applies, added int
	}{
		{"appending backend", true, 0, 1},
		{"backend that only applies", false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &appendingStore{MemoryStore: state.NewMemoryStore()}
			var backend state.Store = inner
			if !tc.appends {
				backend = struct{ state.Store }{inner} // hides Append
			}
			st := GuardStore(KeepOpen{Store: backend}, nil, nil)
			a, ok := st.(state.Appender)
			if !ok {
				t.Fatal("a guarded KeepOpen store is no state.Appender")
			}
			lock, err := st.Lock(ctx, "app", state.LockInfo{})
			if err != nil {
				t.Fatal(err)
			}
			durable, err := a.Append(ctx, lock, state.Put(&state.Resource{Name: "files.a", Type: "img", Status: state.StatusActive}))
			if err != nil {
				t.Fatal(err)
			}
			if err := durable(); err != nil {
				t.Fatal(err)
			}
			if inner.appends != tc.added || inner.applies != tc.applies {
				t.Errorf("appends %d, applies %d; want %d, %d", inner.appends, inner.applies, tc.added, tc.applies)
			}
			doc, err := st.Load(ctx, "app")
			if err != nil || doc.Resources["files.a"] == nil {
				t.Errorf("the write is not in the state: %v %+v", err, doc)
			}
		})
	}
}
