package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
)

// EnvelopeKey is the only key of the object that replaces a secret value in
// the state: {"$secret": "v1:k:<base64 nonce|ciphertext>"} (raw key) or
// {"$secret": "v1:p:<base64 salt>:<base64 nonce|ciphertext>"} (passphrase).
const EnvelopeKey = "$secret"

// Environment variables holding the state key.
const (
	EnvKey        = "GCOMPOSE_STATE_KEY"        // base64 of 32 bytes
	EnvKeyFile    = "GCOMPOSE_STATE_KEY_FILE"   // same as --state-key-file
	EnvPassphrase = "GCOMPOSE_STATE_PASSPHRASE" // stretched with PBKDF2-SHA256
)

// KeyHelp says how to give gcompose the state key, for error messages.
const KeyHelp = "set " + EnvKey + " (base64 of 32 bytes), " + EnvPassphrase + ", or --state-key-file"

// pbkdf2Iterations follows OWASP's 2023 advice for PBKDF2-HMAC-SHA256.
const pbkdf2Iterations = 600_000

// aad binds every ciphertext to its purpose.
var aad = []byte("gcompose state secret v1")

// ErrDecrypt is returned when an envelope does not open: wrong key or
// passphrase, or a modified state.
var ErrDecrypt = errors.New("cannot decrypt a state secret: wrong key or passphrase, or the state was modified")

// Codec encrypts values with AES-256-GCM, one random nonce per value. With
// a passphrase, the key is derived with PBKDF2 and a salt that is the same
// for a whole document (adopted from the first envelope opened, or random).
type Codec struct {
	key        cipher.AEAD // raw key; nil with a passphrase
	passphrase string
	iterations int

	mu      sync.Mutex
	salt    []byte                 // salt of the envelopes this codec writes
	derived map[string]cipher.AEAD // by salt
}

// NewKeyCodec returns a codec for a 32-byte key.
func NewKeyCodec(key []byte) (*Codec, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("state key: want 32 bytes (AES-256), got %d", len(key))
	}
	a, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	return &Codec{key: a}, nil
}

// NewPassphraseCodec returns a codec whose key is derived from passphrase.
func NewPassphraseCodec(passphrase string) (*Codec, error) {
	if passphrase == "" {
		return nil, fmt.Errorf("state passphrase is empty")
	}
	return &Codec{passphrase: passphrase, iterations: pbkdf2Iterations, derived: map[string]cipher.AEAD{}}, nil
}

// ParseKey reads a key as written in GCOMPOSE_STATE_KEY or a key file:
// base64 (standard or URL alphabet, padded or not) of 32 bytes, or 32 raw
// bytes.
func ParseKey(b []byte) ([]byte, error) {
	s := strings.TrimSpace(string(b))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	if len(b) == 32 {
		return b, nil
	}
	return nil, fmt.Errorf("want base64 of 32 random bytes (e.g. from: head -c 32 /dev/urandom | base64)")
}

// CodecFromEnv builds the codec from, in this order, keyFile (--state-key-file
// or GCOMPOSE_STATE_KEY_FILE), GCOMPOSE_STATE_KEY and
// GCOMPOSE_STATE_PASSPHRASE. It returns nil and no error when none is set.
func CodecFromEnv(lookup func(string) (string, bool), keyFile string) (*Codec, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if keyFile == "" {
		keyFile, _ = lookup(EnvKeyFile)
	}
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("state key file: %w", err)
		}
		k, err := ParseKey(b)
		if err != nil {
			return nil, fmt.Errorf("state key file %s: %w", keyFile, err)
		}
		return NewKeyCodec(k)
	}
	if v, ok := lookup(EnvKey); ok && v != "" {
		k, err := ParseKey([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvKey, err)
		}
		return NewKeyCodec(k)
	}
	if v, ok := lookup(EnvPassphrase); ok && v != "" {
		return NewPassphraseCodec(v)
	}
	return nil, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func (c *Codec) derive(salt []byte) (cipher.AEAD, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.derived[string(salt)]; ok {
		return a, nil
	}
	k, err := pbkdf2.Key(sha256.New, c.passphrase, salt, c.iterations, 32)
	if err != nil {
		return nil, fmt.Errorf("deriving the state key: %w", err)
	}
	a, err := newAEAD(k)
	if err != nil {
		return nil, err
	}
	c.derived[string(salt)] = a
	return a, nil
}

// writeSalt returns the salt new envelopes use.
func (c *Codec) writeSalt() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.salt == nil {
		c.salt = make([]byte, 16)
		rand.Read(c.salt)
	}
	return c.salt
}

// adoptSalt makes envelopes written from now on use salt, unless a salt was
// already chosen: one salt per document.
func (c *Codec) adoptSalt(salt []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.salt == nil {
		c.salt = append([]byte(nil), salt...)
	}
}

// Seal encrypts v (any JSON value) into an envelope object.
func (c *Codec) Seal(v any) (map[string]any, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encrypting a state secret: %w", err)
	}
	a, prefix := c.key, "v1:k:"
	if a == nil {
		salt := c.writeSalt()
		if a, err = c.derive(salt); err != nil {
			return nil, err
		}
		prefix = "v1:p:" + base64.RawStdEncoding.EncodeToString(salt) + ":"
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	rand.Read(nonce)
	sealed := a.Seal(nonce, nonce, plain, aad)
	return map[string]any{EnvelopeKey: prefix + base64.RawStdEncoding.EncodeToString(sealed)}, nil
}

// Open decrypts an envelope's text back into the value sealed.
func (c *Codec) Open(text string) (any, error) {
	var a cipher.AEAD
	var data string
	switch {
	case strings.HasPrefix(text, "v1:k:"):
		if c.key == nil {
			return nil, fmt.Errorf("a state secret was encrypted with a key, and only a passphrase is set: %w", ErrDecrypt)
		}
		a, data = c.key, strings.TrimPrefix(text, "v1:k:")
	case strings.HasPrefix(text, "v1:p:"):
		if c.key != nil {
			return nil, fmt.Errorf("a state secret was encrypted with a passphrase, and a key is set: %w", ErrDecrypt)
		}
		saltText, rest, ok := strings.Cut(strings.TrimPrefix(text, "v1:p:"), ":")
		salt, err := base64.RawStdEncoding.DecodeString(saltText)
		if !ok || err != nil || len(salt) == 0 {
			return nil, fmt.Errorf("malformed state secret envelope: %w", ErrDecrypt)
		}
		if a, err = c.derive(salt); err != nil {
			return nil, err
		}
		c.adoptSalt(salt)
		data = rest
	default:
		return nil, fmt.Errorf("unknown state secret envelope version (a newer gcompose?): %w", ErrDecrypt)
	}
	raw, err := base64.RawStdEncoding.DecodeString(data)
	if err != nil || len(raw) < a.NonceSize()+a.Overhead() {
		return nil, fmt.Errorf("malformed state secret envelope: %w", ErrDecrypt)
	}
	plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], aad)
	if err != nil {
		return nil, ErrDecrypt
	}
	var v any
	if err := json.Unmarshal(plain, &v); err != nil {
		return nil, fmt.Errorf("decrypted state secret is not JSON: %w", err)
	}
	return v, nil
}

// envelope reports whether m is an encrypted envelope and returns its text.
func envelope(m map[string]any) (string, bool) {
	if len(m) != 1 {
		return "", false
	}
	s, ok := m[EnvelopeKey].(string)
	return s, ok
}

// IsEnvelope reports whether v is an encrypted envelope.
func IsEnvelope(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	_, ok = envelope(m)
	return ok
}
