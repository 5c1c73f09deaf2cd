package secret

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

func keyCodec(t *testing.T) *Codec {
	c, err := NewKeyCodec(newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fastPass is a passphrase codec with few iterations (tests only).
func fastPass(t *testing.T, pass string) *Codec {
	c, err := NewPassphraseCodec(pass)
	if err != nil {
		t.Fatal(err)
	}
	c.iterations = 1000
	return c
}

func TestCodecRoundTrip(t *testing.T) {
	for name, c := range map[string]*Codec{"key": keyCodec(t), "passphrase": fastPass(t, "correct horse")} {
		for _, v := range []any{"hunter2", "", map[string]any{"a": []any{1.0, "x"}}, 42.0} {
			env, err := c.Seal(v)
			if err != nil {
				t.Fatal(err)
			}
			text := env[EnvelopeKey].(string)
			if s, ok := v.(string); ok && s != "" && strings.Contains(text, s) {
				t.Errorf("%s: envelope shows the value: %s", name, text)
			}
			got, err := c.Open(text)
			if err != nil {
				t.Fatalf("%s: Open: %v", name, err)
			}
			if !sameJSON(got, v) {
				t.Errorf("%s: got %v, want %v", name, got, v)
			}
		}
		a, _ := c.Seal("same")
		b, _ := c.Seal("same")
		if a[EnvelopeKey] == b[EnvelopeKey] {
			t.Errorf("%s: two envelopes of one value are equal (nonce reuse)", name)
		}
	}
}

func TestCodecWrongKeyAndTampering(t *testing.T) {
	c := keyCodec(t)
	env, _ := c.Seal("hunter2")
	text := env[EnvelopeKey].(string)
	if _, err := keyCodec(t).Open(text); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong key: err = %v", err)
	}
	raw, _ := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(text, "v1:k:"))
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 1
		if _, err := c.Open("v1:k:" + base64.RawStdEncoding.EncodeToString(bad)); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("byte %d flipped: err = %v", i, err)
		}
	}
	for _, bad := range []string{"v1:k:", "v1:k:!!", "v2:k:AAAA", "v1:p:AAAA"} {
		if _, err := c.Open(bad); !errors.Is(err, ErrDecrypt) {
			t.Errorf("Open(%q): err = %v", bad, err)
		}
	}
	p := fastPass(t, "one")
	penv, _ := p.Seal("x")
	q := fastPass(t, "two")
	if _, err := q.Open(penv[EnvelopeKey].(string)); !errors.Is(err, ErrDecrypt) {
		t.Errorf("wrong passphrase: err = %v", err)
	}
	if _, err := c.Open(penv[EnvelopeKey].(string)); !errors.Is(err, ErrDecrypt) {
		t.Errorf("passphrase envelope with a key: err = %v", err)
	}
}

// A passphrase codec writes with the salt of the document it read.
func TestPassphraseSaltPerDocument(t *testing.T) {
	w := fastPass(t, "pw")
	env, _ := w.Seal("a")
	text := env[EnvelopeKey].(string)
	salt := strings.Split(text, ":")[2]
	r := fastPass(t, "pw")
	if _, err := r.Open(text); err != nil {
		t.Fatal(err)
	}
	env2, _ := r.Seal("b")
	if got := strings.Split(env2[EnvelopeKey].(string), ":")[2]; got != salt {
		t.Errorf("salt %s, want the document's %s", got, salt)
	}
}

func TestCodecFromEnv(t *testing.T) {
	key := newKey(t)
	b64 := base64.StdEncoding.EncodeToString(key)
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if c, err := CodecFromEnv(env(nil), ""); c != nil || err != nil {
		t.Errorf("nothing set: %v, %v", c, err)
	}
	c, err := CodecFromEnv(env(map[string]string{EnvKey: b64}), "")
	if err != nil || c == nil || c.key == nil {
		t.Fatalf("key: %v", err)
	}
	if _, err := CodecFromEnv(env(map[string]string{EnvKey: "c2hvcnQ="}), ""); err == nil || !strings.Contains(err.Error(), EnvKey) {
		t.Errorf("short key: %v", err)
	}
	f := filepath.Join(t.TempDir(), "key")
	os.WriteFile(f, []byte(b64+"\n"), 0o600)
	fc, err := CodecFromEnv(env(map[string]string{EnvPassphrase: "x"}), f)
	if err != nil || fc.key == nil {
		t.Fatalf("key file: %v", err)
	}
	sealed, _ := fc.Seal("v")
	if _, err := c.Open(sealed[EnvelopeKey].(string)); err != nil {
		t.Errorf("the key file and the env key differ: %v", err)
	}
	pc, err := CodecFromEnv(env(map[string]string{EnvPassphrase: "x"}), "")
	if err != nil || pc.passphrase != "x" {
		t.Errorf("passphrase: %v", err)
	}
	if _, err := CodecFromEnv(env(nil), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing key file: no error")
	}
}
