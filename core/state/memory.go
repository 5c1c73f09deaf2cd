package state

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// MemoryStore keeps state in memory, with the same semantics as FileStore
// (locks, fencing, serials, lineage), for fast unit tests and benchmarks of
// the engine. Nothing survives the process.
type MemoryStore struct {
	mu   sync.Mutex
	apps map[string]*memApp
}

type memApp struct {
	doc  *Document
	lock *LockInfo
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{apps: map[string]*memApp{}} }

func (s *MemoryStore) app(name string) *memApp {
	a := s.apps[name]
	if a == nil {
		a = &memApp{doc: NewDocument(name)}
		s.apps[name] = a
	}
	return a
}

// Close implements Store.
func (s *MemoryStore) Close() error { return nil }

// Lock implements Store.
func (s *MemoryStore) Lock(ctx context.Context, app string, info LockInfo) (*Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if app == "" {
		return nil, errors.New("empty application name")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.app(app)
	if a.lock != nil {
		return nil, &LockedError{App: app, Info: *a.lock, Hint: fmt.Sprintf("gcompose unlock %s removes it", a.lock.ID)}
	}
	if info.ID == "" {
		info.ID = NewID()
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	held := info
	a.lock = &held
	return &Lock{App: app, Info: info, Scope: fmt.Sprintf("mem:%p:%s", s, app)}, nil
}

// fenced runs fn with the store mutex held if l is the app's current lock.
func (s *MemoryStore) fenced(l *Lock, fn func(a *memApp) error) error {
	if l == nil {
		return errors.New("state write without a lock")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[l.App]
	if a == nil || a.lock == nil || a.lock.ID != l.Info.ID {
		why := "it was released or force-unlocked"
		if a != nil && a.lock != nil {
			why = fmt.Sprintf("it is now held by %s for %s, lock ID %s", a.lock.Who(), a.lock.Operation, a.lock.ID)
		}
		return fmt.Errorf("state for app %q, lock %s: %w: %s", l.App, l.Info.ID, ErrLockNotHeld, why)
	}
	return fn(a)
}

// Unlock implements Store.
func (s *MemoryStore) Unlock(ctx context.Context, l *Lock) error {
	return s.fenced(l, func(a *memApp) error {
		a.lock = nil
		return nil
	})
}

// ForceUnlock implements Store.
func (s *MemoryStore) ForceUnlock(ctx context.Context, app, lockID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.apps[app]
	if a == nil || a.lock == nil {
		return fmt.Errorf("unlock: state for app %q is not locked", app)
	}
	if a.lock.ID != lockID {
		return fmt.Errorf("unlock: state for app %q is locked with ID %s (by %s), not %s", app, a.lock.ID, a.lock.Who(), lockID)
	}
	a.lock = nil
	return nil
}

// LockInfo implements Store.
func (s *MemoryStore) LockInfo(ctx context.Context, app string) (*LockInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[app]; a != nil && a.lock != nil {
		i := *a.lock
		return &i, nil
	}
	return nil, nil
}

// Load implements Store.
func (s *MemoryStore) Load(ctx context.Context, app string) (*Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.apps[app]; a != nil {
		return a.doc.Clone(), nil
	}
	return NewDocument(app), nil
}

// Apply implements Store.
func (s *MemoryStore) Apply(ctx context.Context, l *Lock, changes ...Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now().UTC()
	prepared, err := PrepareChanges(changes, now)
	if err != nil {
		return fmt.Errorf("state for app %q: %w", lockApp(l), err)
	}
	return s.fenced(l, func(a *memApp) error {
		if len(prepared) == 0 {
			return nil
		}
		if a.doc.Lineage == "" {
			a.doc.Lineage = NewID()
		}
		a.doc.apply(prepared, now)
		a.doc.Serial++
		return nil
	})
}

// Compact implements Store (nothing to fold in memory).
func (s *MemoryStore) Compact(ctx context.Context, l *Lock) error {
	return s.fenced(l, func(*memApp) error { return nil })
}

// Replace implements Store.
func (s *MemoryStore) Replace(ctx context.Context, l *Lock, doc *Document, force bool) error {
	if doc == nil {
		return errors.New("state replace: nil document")
	}
	return s.fenced(l, func(a *memApp) error {
		next, err := replacement(a.doc, doc, l.App, force)
		if err != nil {
			return err
		}
		a.doc = next
		return nil
	})
}

// Apps implements Store: applications with at least one write.
func (s *MemoryStore) Apps(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, a := range s.apps {
		if a.doc.Serial > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

var _ Store = (*MemoryStore)(nil)
