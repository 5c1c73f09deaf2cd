package secret

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// The file backend gets envelopes only: nothing in its directory shows a
// secret; Load gives the values back and teaches them to the redactor.
func TestStoreEncryptsAtTheBoundary(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	red := NewRedactor()
	red.Add("hunter2")
	codec := keyCodec(t)
	st := &Store{Store: fs, Codec: codec, Redactor: red}
	lock, err := st.Lock(ctx, "app", state.NewLockInfo("test", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	r := &state.Resource{Name: "db", Type: "img", Status: state.StatusActive,
		Config:   map[string]any{"url": "pg://u:hunter2@h", "port": 5432.0, "list": []any{"hunter2", "plain"}},
		State:    map[string]any{"content": "hunter2"},
		Identity: map[string]any{"path": "db.txt"}}
	if err := st.Apply(ctx, lock, state.Put(r)); err != nil {
		t.Fatal(err)
	}
	if r.Config["url"] != "pg://u:hunter2@h" {
		t.Error("Apply modified the caller's resource")
	}
	doc, _ := fs.Load(ctx, "app")
	if err := st.Replace(ctx, lock, doc, false); err != nil { // already sealed: stays sealed
		t.Fatal(err)
	}
	full, _ := st.Load(ctx, "app")
	full.Resources["db"].State["more"] = "x hunter2"
	if err := st.Replace(ctx, lock, full, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx, lock); err != nil {
		t.Fatal(err)
	}
	if err := st.Unlock(ctx, lock); err != nil {
		t.Fatal(err)
	}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("%s shows the secret:\n%s", p, b)
		}
		return nil
	})
	raw, _ := fs.Load(ctx, "app")
	if !IsEnvelope(raw.Resources["db"].Config["url"]) || !IsEnvelope(raw.Resources["db"].State["content"]) || IsEnvelope(raw.Resources["db"].Config["port"]) {
		t.Errorf("stored config: %v", raw.Resources["db"].Config)
	}

	// A new run: the values come back, and the redactor learns them.
	red2 := NewRedactor()
	got, err := (&Store{Store: fs, Codec: codec, Redactor: red2}).Load(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"url": "pg://u:hunter2@h", "port": 5432.0, "list": []any{"hunter2", "plain"}}
	if !sameJSON(got.Resources["db"].Config, want) || got.Resources["db"].State["more"] != "x hunter2" {
		t.Errorf("decrypted: %v %v", got.Resources["db"].Config, got.Resources["db"].State)
	}
	if red2.Redact("pg://u:hunter2@h") != Mask {
		t.Error("the redactor did not learn the decrypted value")
	}

	// No key: a clear error; KeepSealed leaves the envelopes.
	_, err = (&Store{Store: fs, Redactor: NewRedactor()}).Load(ctx, "app")
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), EnvKey) || !strings.Contains(err.Error(), "db") {
		t.Errorf("no key: %v", err)
	}
	sealed, err := (&Store{Store: fs, Redactor: NewRedactor(), KeepSealed: true}).Load(ctx, "app")
	if err != nil || !IsEnvelope(sealed.Resources["db"].Config["url"]) {
		t.Errorf("KeepSealed: %v", err)
	}
	// Wrong key: refused.
	if _, err := (&Store{Store: fs, Codec: keyCodec(t), Redactor: NewRedactor()}).Load(ctx, "app"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong key: %v", err)
	}
}

// Without a key, a write that would store a secret is refused; one
// without secrets goes through.
func TestStoreRefusesPlaintextSecrets(t *testing.T) {
	ctx := context.Background()
	red := NewRedactor()
	red.Add("hunter2")
	st := &Store{Store: state.NewMemoryStore(), Redactor: red}
	lock, err := st.Lock(ctx, "app", state.NewLockInfo("test", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Apply(ctx, lock, state.Put(&state.Resource{Name: "a", Config: map[string]any{"p": "hunter2"}}))
	if !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), EnvPassphrase) {
		t.Errorf("secret without key: %v", err)
	}
	if err := st.Apply(ctx, lock, state.Put(&state.Resource{Name: "b", Config: map[string]any{"p": "plain"}})); err != nil {
		t.Errorf("no secret: %v", err)
	}
}
