package secret

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gcompose/gcompose/core/state"
)

// ErrNoKey is returned when the state holds encrypted secrets (or a write
// must encrypt some) and no key is set.
var ErrNoKey = errors.New("no state key")

// Store wraps a state.Store (any backend) at the boundary where resources
// are persisted: every string of a resource's config, state or identity
// that holds a value the Redactor knows is written as an encrypted envelope
// (Apply, Replace), and envelopes are decrypted on Load, their values
// joining the Redactor so they are masked in everything printed.
type Store struct {
	state.Store
	// Codec encrypts and decrypts; nil when no key is set: then Load of a
	// state holding envelopes fails with ErrNoKey (unless KeepSealed) and so
	// does a write that would have to encrypt.
	Codec    *Codec
	Redactor *Redactor
	// KeepSealed makes Load leave envelopes in place instead of failing
	// when there is no codec (state show, which masks them).
	KeepSealed bool
}

// Load decrypts every envelope of the document.
func (s *Store) Load(ctx context.Context, app string) (*state.Document, error) {
	doc, err := s.Store.Load(ctx, app)
	if err != nil || doc == nil {
		return doc, err
	}
	return s.Unseal(app, doc)
}

// Unseal decrypts, in place, the envelopes of a document read some other
// way (a state file, another backend), as Load does; the Store's own
// backend is not used.
func (s *Store) Unseal(app string, doc *state.Document) (*state.Document, error) {
	var sealed []string
	for _, name := range doc.Names() {
		r := doc.Resources[name]
		if countEnvelopes(r.Config)+countEnvelopes(r.State)+countEnvelopes(r.Identity) > 0 {
			sealed = append(sealed, name)
		}
	}
	if len(sealed) == 0 {
		return doc, nil
	}
	if s.Codec == nil {
		if s.KeepSealed {
			return doc, nil
		}
		return nil, fmt.Errorf("the state of %s holds encrypted secrets (resources %s): %s to the key they were written with: %w",
			app, strings.Join(sealed, ", "), KeyHelp, ErrNoKey)
	}
	for _, name := range sealed {
		r := doc.Resources[name]
		for _, m := range []*map[string]any{&r.Config, &r.State, &r.Identity} {
			v, err := s.open(*m)
			if err != nil {
				return nil, fmt.Errorf("state of %s, resource %s: %w", app, name, err)
			}
			if mv, ok := v.(map[string]any); ok {
				*m = mv
			}
		}
	}
	return doc, nil
}

func (s *Store) open(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if text, ok := envelope(x); ok {
			val, err := s.Codec.Open(text)
			if err != nil {
				return nil, err
			}
			s.learn(val)
			return val, nil
		}
		if x == nil {
			return nil, nil
		}
		for k, e := range x {
			d, err := s.open(e)
			if err != nil {
				return nil, err
			}
			x[k] = d
		}
		return x, nil
	case []any:
		for i, e := range x {
			d, err := s.open(e)
			if err != nil {
				return nil, err
			}
			x[i] = d
		}
		return x, nil
	}
	return v, nil
}

// learn registers a decrypted value: it was secret when written.
func (s *Store) learn(v any) {
	if s.Redactor == nil {
		return
	}
	s.Redactor.AddValue(v)
}

// Apply encrypts the secrets of every resource put.
func (s *Store) Apply(ctx context.Context, lock *state.Lock, changes ...state.Change) error {
	out, err := s.sealChanges(changes)
	if err != nil {
		return err
	}
	return s.Store.Apply(ctx, lock, out...)
}

// Append implements state.Appender, encrypting as Apply does; a backend
// that cannot append applies at once.
func (s *Store) Append(ctx context.Context, lock *state.Lock, changes ...state.Change) (func() error, error) {
	out, err := s.sealChanges(changes)
	if err != nil {
		return nil, err
	}
	if a, ok := s.Store.(state.Appender); ok {
		return a.Append(ctx, lock, out...)
	}
	if err := s.Store.Apply(ctx, lock, out...); err != nil {
		return nil, err
	}
	return func() error { return nil }, nil
}

func (s *Store) sealChanges(changes []state.Change) ([]state.Change, error) {
	out := make([]state.Change, len(changes))
	for i, ch := range changes {
		out[i] = ch
		if ch.Put != nil {
			r, err := s.seal(ch.Put)
			if err != nil {
				return nil, err
			}
			out[i].Put = r // a change with both put and delete stays invalid
		}
	}
	return out, nil
}

// Replace encrypts the secrets of every resource of doc.
func (s *Store) Replace(ctx context.Context, lock *state.Lock, doc *state.Document, force bool) error {
	if doc != nil {
		c := *doc
		c.Resources = make(map[string]*state.Resource, len(doc.Resources))
		for name, r := range doc.Resources {
			sr, err := s.seal(r)
			if err != nil {
				return err
			}
			c.Resources[name] = sr
		}
		doc = &c
	}
	return s.Store.Replace(ctx, lock, doc, force)
}

// seal returns r, or a copy of it with its secrets encrypted.
func (s *Store) seal(r *state.Resource) (*state.Resource, error) {
	if s.Redactor == nil || s.Redactor.Len() == 0 {
		return r, nil
	}
	failed := r.Pending != nil && s.Redactor.Contains(r.Pending.Failed)
	if !s.holds(r.Config) && !s.holds(r.State) && !s.holds(r.Identity) {
		if failed {
			// The error of a failed action (an adapter's message) is kept
			// to say why; a secret in it is masked, not encrypted.
			c := r.Clone()
			c.Pending.Failed = s.Redactor.Redact(c.Pending.Failed)
			return c, nil
		}
		return r, nil
	}
	if s.Codec == nil {
		return nil, fmt.Errorf("resource %s holds a secret, and the state stores secrets only encrypted: %s: %w", r.Name, KeyHelp, ErrNoKey)
	}
	c := r.Clone()
	if failed {
		c.Pending.Failed = s.Redactor.Redact(c.Pending.Failed)
	}
	for _, m := range []*map[string]any{&c.Config, &c.State, &c.Identity} {
		v, err := s.sealValue(*m)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Name, err)
		}
		if mv, ok := v.(map[string]any); ok && *m != nil {
			*m = mv
		}
	}
	return c, nil
}

func (s *Store) holds(v any) bool {
	switch x := v.(type) {
	case string:
		return s.Redactor.Contains(x)
	case map[string]any:
		for _, e := range x {
			if s.holds(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if s.holds(e) {
				return true
			}
		}
	}
	return false
}

// sealValue replaces every string holding a secret with its envelope (in
// place: v is a clone).
func (s *Store) sealValue(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if s.Redactor.Contains(x) {
			return s.Codec.Seal(x)
		}
	case map[string]any:
		if x == nil {
			return x, nil
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e, err := s.sealValue(x[k])
			if err != nil {
				return nil, err
			}
			x[k] = e
		}
	case []any:
		for i, e := range x {
			d, err := s.sealValue(e)
			if err != nil {
				return nil, err
			}
			x[i] = d
		}
	}
	return v, nil
}

func countEnvelopes(v any) int {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := envelope(x); ok {
			return 1
		}
		n := 0
		for _, e := range x {
			n += countEnvelopes(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += countEnvelopes(e)
		}
		return n
	}
	return 0
}
