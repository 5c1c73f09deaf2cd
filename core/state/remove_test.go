package state_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

type remover interface {
	state.Store
	Remove(ctx context.Context, l *state.Lock) error
}

func TestRemove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := state.NewFileStore(dir, state.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]remover{"file": fs, "memory": state.NewMemoryStore()} {
		t.Run(name, func(t *testing.T) {
			l, err := s.Lock(ctx, "app", state.NewLockInfo("state mv", "test"))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(ctx, l, state.Put(statetest.Res("a", 1))); err != nil {
				t.Fatal(err)
			}
			if err := s.Compact(ctx, l); err != nil {
				t.Fatal(err)
			}
			if err := s.Apply(ctx, l, state.Put(statetest.Res("b", 1))); err != nil { // journaled
				t.Fatal(err)
			}
			old, _ := s.Load(ctx, "app")
			if err := s.Remove(ctx, l); err != nil {
				t.Fatal(err)
			}
			if d, err := s.Load(ctx, "app"); err != nil || d.Serial != 0 || d.Lineage != "" || len(d.Resources) != 0 {
				t.Fatalf("after Remove: %+v, %v", d, err)
			}
			if apps, err := s.Apps(ctx); err != nil || len(apps) != 0 {
				t.Fatalf("Apps after Remove = %v, %v", apps, err)
			}
			if name == "file" {
				b, err := os.ReadFile(fs.RemovedPath("app"))
				if err != nil || !containsAll(string(b), old.Lineage, `"b"`, `"a"`) {
					t.Fatalf("removed document after Remove: %s, %v", b, err)
				}
				for _, p := range []string{fs.BackupPath("app"), fs.JournalBackupPath("app")} {
					if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("%s after Remove: %v (a trace Load would take for a lost document)", p, err)
					}
				}
			}
			if err := s.Apply(ctx, l, state.Put(statetest.Res("c", 1))); err != nil {
				t.Fatal(err)
			}
			if d, _ := s.Load(ctx, "app"); d.Serial != 1 || d.Lineage == old.Lineage {
				t.Fatalf("write after Remove: serial %d lineage %s (old %s)", d.Serial, d.Lineage, old.Lineage)
			}
			if err := s.Unlock(ctx, l); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(ctx, l); !errors.Is(err, state.ErrLockNotHeld) {
				t.Fatalf("Remove with a released lock: %v", err)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
