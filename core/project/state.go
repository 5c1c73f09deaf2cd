package project

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/reconcile"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/stateurl"
)

// The state as the commands see it. They render what a state holds
// (documents, resources, lock holders) and ask for whole operations (push,
// move, recover) that lock, write and read back here, so no command takes
// a state lock itself or needs to know which backend it talks to.
type (
	// Document is one application's state.
	Document = state.Document
	// Resource is one resource of a Document.
	Resource = state.Resource
	// Status is a resource's status in the state.
	Status = state.Status
	// LockInfo says who holds a state lock, for what, since when.
	LockInfo = state.LockInfo
	// StateOptions configure an etcd backend (certificates, user, lock TTL).
	StateOptions = stateurl.Options
)

// State is a state backend opened from its URL. Close it.
type State struct {
	store state.Store
	url   string
}

// OpenState opens the backend url names (a directory, file://DIR,
// etcd://...).
func OpenState(ctx context.Context, url string, opts StateOptions) (*State, error) {
	st, err := stateurl.Open(ctx, url, opts)
	if err != nil {
		return nil, err
	}
	return &State{store: st, url: url}, nil
}

// NewState is a State on a store already open (tests, other callers of
// core/project).
func NewState(st state.Store, url string) *State { return &State{store: st, url: url} }

// Store is the backend itself, for a Session (Options.Store).
func (s *State) Store() state.Store { return s.store }

// Shown is the URL as it may be printed: no password.
func (s *State) Shown() string { return stateurl.Redact(s.url) }

// Close closes the backend.
func (s *State) Close() error { return s.store.Close() }

// Load reads an application's state; an application never written is an
// empty document (Serial 0).
func (s *State) Load(ctx context.Context, app string) (*Document, error) {
	return s.store.Load(ctx, app)
}

// LoadShown is Load for showing: secrets decrypted with codec when it is
// given; without it, encrypted values stay sealed unless keepSealed is
// false, which then fails naming the key that is needed.
func (s *State) LoadShown(ctx context.Context, app string, codec *secret.Codec, red *secret.Redactor, keepSealed bool) (*Document, error) {
	return (&secret.Store{Store: s.store, Codec: codec, Redactor: red, KeepSealed: keepSealed}).Load(ctx, app)
}

// Apps lists the applications the backend holds a state for.
func (s *State) Apps(ctx context.Context) ([]string, error) { return s.store.Apps(ctx) }

// LockInfo says who holds app's lock; nil when nobody does.
func (s *State) LockInfo(ctx context.Context, app string) (*LockInfo, error) {
	return s.store.LockInfo(ctx, app)
}

// ForceUnlock removes app's lock by its ID (its holder died).
func (s *State) ForceUnlock(ctx context.Context, app, id string) error {
	return s.store.ForceUnlock(ctx, app, id)
}

// DecodeDocument reads a state document as state pull writes it, or a
// copy of a state file (its checksum must match); unknown keys, or JSON
// that is no state document, are refused.
func DecodeDocument(data []byte) (*Document, error) {
	doc, _, err := state.DecodeDocument(data)
	if err != nil {
		return nil, err
	}
	if doc.FormatVersion == 0 || !bytes.Contains(data, []byte(`"resources"`)) {
		return nil, errors.New("no format_version or no resources: not a gcompose state document (gcompose state pull writes one)")
	}
	return doc, nil
}

// Locking says how a whole operation takes its state locks: who it is
// (operation, gcompose's version) and how long it waits for a lock someone
// else holds.
type Locking struct {
	Operation, Version string
	Timeout            time.Duration
}

func (l Locking) acquire(ctx context.Context, st state.Store, app string) (*state.Lock, error) {
	return state.Acquire(ctx, st, app, state.NewLockInfo(l.Operation, l.Version), l.Timeout)
}

// Push replaces app's state by doc under app's lock, refusing another
// lineage or an older serial unless force, and returns the state read back.
func (s *State) Push(ctx context.Context, app string, doc *Document, force bool, lk Locking) (*Document, error) {
	l, err := lk.acquire(ctx, s.store, app)
	if err != nil {
		return nil, err
	}
	err = s.store.Replace(ctx, l, doc, force)
	if uerr := s.store.Unlock(context.WithoutCancel(ctx), l); err == nil && uerr != nil {
		err = uerr
	}
	if err != nil {
		return nil, err
	}
	return s.store.Load(ctx, app)
}

// remover is a store that can delete an application's state: the file,
// memory and etcd backends.
type remover interface {
	Remove(ctx context.Context, l *state.Lock) error
}

// ErrNoSuchState is a state move's source without a state for the app;
// ErrCannotRemove its source asked to remove a state it cannot remove.
var (
	ErrNoSuchState  = errors.New("no state")
	ErrCannotRemove = errors.New("cannot remove state")
)

// Move copies app's state from s to dst, both locked, reads it back from
// dst, and then, when removeSource, removes it from s. It returns the
// state dst holds. A target holding another lineage or a newer serial is
// refused unless force.
func (s *State) Move(ctx context.Context, dst *State, app string, force, removeSource bool, lk Locking) (*Document, error) {
	rm, canRemove := s.store.(remover)
	if removeSource && !canRemove {
		return nil, fmt.Errorf("the source backend %s %w", s.Shown(), ErrCannotRemove)
	}
	ls, err := lk.acquire(ctx, s.store, app)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", s.Shown(), err)
	}
	defer s.store.Unlock(context.WithoutCancel(ctx), ls)
	ld, err := lk.acquire(ctx, dst.store, app)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", dst.Shown(), err)
	}
	defer dst.store.Unlock(context.WithoutCancel(ctx), ld)
	doc, err := s.store.Load(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", s.Shown(), err)
	}
	if doc.Serial == 0 {
		return nil, fmt.Errorf("%w for app %q in %s", ErrNoSuchState, app, s.Shown())
	}
	if err := dst.store.Replace(ctx, ld, doc, force); err != nil {
		return nil, fmt.Errorf("target %s: %w", dst.Shown(), err)
	}
	got, err := dst.store.Load(ctx, app)
	if err != nil {
		return nil, fmt.Errorf("target %s: reading back: %w", dst.Shown(), err)
	}
	if got.Lineage != doc.Lineage || len(got.Resources) != len(doc.Resources) {
		return nil, fmt.Errorf("target %s: read back lineage %s with %d resources, wrote %s with %d; the source is kept", dst.Shown(), got.Lineage, len(got.Resources), doc.Lineage, len(doc.Resources))
	}
	if removeSource {
		if err := rm.Remove(ctx, ls); err != nil {
			return nil, fmt.Errorf("state copied to %s, but removing it from %s failed: %w", dst.Shown(), s.Shown(), err)
		}
	}
	return got, nil
}

// Recovery is what a recover found: the document rebuilt, what was lost.
type Recovery = state.Recovery

// ErrIntact is a recover of a state that needs none; ErrNoRecovery one on
// a backend that keeps nothing to recover from.
var (
	ErrIntact     = errors.New("the state is intact: nothing to recover")
	ErrNoRecovery = errors.New("keeps nothing to recover from")
)

// Recover rebuilds app's damaged state from what the backend keeps (the
// file backend's backup and journal), under app's lock. write says, given
// what was recovered, whether to write it; Recover returns it either way.
func (s *State) Recover(ctx context.Context, app string, lk Locking, write func(*Recovery) (bool, error)) (*Recovery, error) {
	rc, ok := s.store.(state.Recoverer)
	if !ok {
		return nil, fmt.Errorf("the %T backend %w", s.store, ErrNoRecovery)
	}
	if _, err := s.store.Load(ctx, app); err == nil {
		return nil, ErrIntact
	} else if !errors.Is(err, state.ErrMissingDocument) && !errors.Is(err, state.ErrCorrupt) {
		return nil, err
	}
	lock, err := lk.acquire(ctx, s.store, app)
	if err != nil {
		return nil, err
	}
	defer s.store.Unlock(context.WithoutCancel(ctx), lock)
	rec, err := rc.Recover(ctx, app)
	if err != nil {
		return nil, err
	}
	ok, err = write(rec)
	if err != nil || !ok {
		return rec, err
	}
	if err := s.store.Replace(ctx, lock, rec.Doc, true); err != nil {
		return rec, fmt.Errorf("writing the recovered state: %w", err)
	}
	return rec, nil
}

// ReadStateFile reads a state file (APP.json) as its backend does —
// checksum checked, journal replayed when the directory holds it — for a
// comparison with another state.
func ReadStateFile(ctx context.Context, dir, app string) (*Document, error) {
	st, err := state.NewFileStore(dir, state.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return st.Load(ctx, app)
}

// dirStore is a backend that keeps its state in a local directory (the
// file backend).
type dirStore interface{ Dir() string }

// LocalDir is the directory the backend keeps its state in, when it is a
// local one.
func (s *State) LocalDir() (string, bool) {
	if d, ok := s.store.(dirStore); ok {
		return d.Dir(), true
	}
	return "", false
}

// electionStore is a backend whose clients can elect one leader among
// them (etcd).
type electionStore interface{ Client() *clientv3.Client }

// Elector is how reconcilers of app on this state elect one leader:
// through the backend when it can (etcd), nil when it cannot and a
// reconciler leads alone. ttl 0 is the backend's lock TTL.
func (s *State) Elector(app, version string, ttl time.Duration) (reconcile.Elector, error) {
	es, ok := s.store.(electionStore)
	if !ok {
		return nil, nil
	}
	u, err := stateurl.ParseEtcd(s.url)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = etcd.DefaultLockTTL
	}
	holder := state.NewLockInfo("reconcile", version)
	return &reconcile.EtcdElector{Client: es.Client(), Key: reconcile.ElectionKey(u.Prefix, app),
		TTL: ttl, Holder: holder.Holder + " id " + state.NewID()}, nil
}

// LoadGuarded is Load through the secret guard: secret values are
// decrypted with codec (nil: no key given) and learnt by red, so that
// whatever quotes them afterwards is masked.
func (s *State) LoadGuarded(ctx context.Context, app string, codec *secret.Codec, red *secret.Redactor) (*Document, error) {
	return GuardStore(KeepOpen{Store: s.store}, codec, red).Load(ctx, app)
}

// KeepOpen is the state as a session's store that the session does not
// close: a reconciler's sessions come and go, its state stays open.
func (s *State) KeepOpen() *State { return &State{store: KeepOpen{Store: s.store}, url: s.url} }
