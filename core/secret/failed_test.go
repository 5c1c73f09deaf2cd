package secret

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
)

// A failed action's error is kept in the state to say why; a secret value
// in it (an adapter that echoed its password) is masked on the way to the
// disk, with or without secrets in the resource's config.
func TestFailedActionErrorMasked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	red := NewRedactor()
	red.Add("pw-1f5cd515")
	s := &Store{Store: fs, Codec: keyCodec(t), Redactor: red}
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	for _, cfg := range []map[string]any{{"plain": "x"}, {"password": "pw-1f5cd515"}} {
		r := &state.Resource{Name: "db", Type: "t", Status: state.StatusPending, Config: cfg,
			Pending: &state.Operation{ID: "op", Kind: state.OpCreate, Failed: "cannot log in with password pw-1f5cd515", FailedAt: &at}}
		if err := s.Apply(ctx, l, state.Put(r)); err != nil {
			t.Fatal(err)
		}
		if err := s.Compact(ctx, l); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{fs.DocPath("app"), fs.JournalBackupPath("app")} {
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), "pw-1f5cd515") || !strings.Contains(string(b), "cannot log in with password ") {
				t.Fatalf("%s (config %v):\n%s", p, cfg, b)
			}
		}
	}
}
