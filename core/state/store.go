package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/gcompose/gcompose/internal/backoff"
)

// Store keeps application state documents. Implementations: FileStore,
// MemoryStore, and etcd's (package etcd). All methods are safe for
// concurrent use.
//
// Reads need no lock. Every write takes the *Lock returned by Lock and is
// refused with ErrLockNotHeld once that lock is no longer held (released,
// force-unlocked, or on etcd, its lease expired): a process that lost its
// lock can never overwrite a newer state. A backend may lose a lock on its
// own (a lease); callers learn it from that error on their next write.
type Store interface {
	// Lock takes the application's lock once, without waiting. When someone
	// holds it, the error is a *LockedError (errors.Is ErrLocked) saying
	// who, for what and since when. info.ID is assigned when empty. Use
	// Acquire to wait. Taking the lock also prepares the backend for
	// writes (the file backend replays the journal and trims a torn tail).
	Lock(ctx context.Context, app string, info LockInfo) (*Lock, error)
	// Unlock releases a lock taken by Lock. Releasing a lock that is no
	// longer held returns ErrLockNotHeld.
	Unlock(ctx context.Context, lock *Lock) error
	// ForceUnlock removes the application's lock if its ID is lockID
	// (gcompose unlock); the old holder's later writes are refused. The
	// file backend refuses while the holder lives: its lock is an OS lock,
	// released only by the holder's end.
	ForceUnlock(ctx context.Context, app, lockID string) error
	// LockInfo returns who holds the application's lock, or nil when nobody
	// does.
	LockInfo(ctx context.Context, app string) (*LockInfo, error)

	// Load returns the current document: the last compacted document plus
	// every journaled change. An application with no state yields an empty
	// document (Serial 0, no lineage); one whose document is lost but whose
	// traces remain yields a *MissingDocumentError, never an empty document;
	// damaged bytes yield an error matching ErrCorrupt. The result is the
	// caller's to modify.
	// A Load after Lock sees every write made before the lock was taken:
	// plan from that, not from a Load made before locking.
	Load(ctx context.Context, app string) (*Document, error)
	// Apply makes changes durable, as one unit, before it returns, and
	// increments the serial by one (no changes: nothing is written). Its
	// cost is proportional to the size of the changes, not of the document.
	Apply(ctx context.Context, lock *Lock, changes ...Change) error
	// Compact folds the changes applied so far into the document (at the
	// end of a run). The content and serial do not change.
	Compact(ctx context.Context, lock *Lock) error
	// Replace overwrites the whole document (state push, state mv). It is
	// refused when doc has another lineage or a lower serial than the
	// stored state, unless force. The stored serial becomes
	// max(doc.Serial, current+1); the lineage becomes doc's (or a new one).
	Replace(ctx context.Context, lock *Lock, doc *Document, force bool) error
	// Apps lists the applications that have state, sorted.
	Apps(ctx context.Context) ([]string, error)
	// Close releases the store's resources (not the locks it holds).
	Close() error
}

// Appender is a Store whose writes can return before they are durable
// against a crash of the machine (FileStore): Append does what Apply does,
// but returns once the changes are ordered after every earlier write and
// would survive the process being killed (in the operating system's
// hands); they are durable once durable returns, or once any later Apply
// of the same lock returns. A crash of the machine keeps a prefix of the
// writes. durable's error is Apply's: the write did not become durable.
type Appender interface {
	Append(ctx context.Context, lock *Lock, changes ...Change) (durable func() error, err error)
}

// LockInfo says who holds a lock, for what, since when.
type LockInfo struct {
	// ID identifies this holding of the lock (gcompose unlock ID).
	ID string `json:"id"`
	// Holder is "user@host pid N".
	Holder string `json:"holder"`
	User   string `json:"user,omitempty"`
	Host   string `json:"host,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// Operation is what the holder does: "deploy", "destroy", "state push".
	Operation string    `json:"operation"`
	Created   time.Time `json:"created"`
	// Version is the holder's gcompose version.
	Version string `json:"version,omitempty"`
	// InContainer: the holder runs in a container, where PID is its PID in
	// the container's namespace.
	InContainer bool `json:"in_container,omitempty"`
	// OSLock is set in the file backend's lock file: its holder holds an OS
	// lock (flock) on the file for as long as it lives. A lock file without
	// it was written by an older gcompose, which held no OS lock.
	OSLock bool `json:"os_lock,omitempty"`
}

// NewLockInfo describes this process holding a lock for operation.
func NewLockInfo(operation, version string) LockInfo {
	u := "unknown"
	if cu, err := user.Current(); err == nil && cu.Username != "" {
		u = cu.Username
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "localhost"
	}
	pid := os.Getpid()
	_, err = os.Stat("/.dockerenv")
	inContainer := err == nil
	holder := fmt.Sprintf("%s@%s pid %d", u, h, pid)
	if inContainer {
		holder += " in a container"
	}
	return LockInfo{
		InContainer: inContainer,
		Holder:      holder,
		User:        u,
		Host:        h,
		PID:         pid,
		Operation:   operation,
		Created:     time.Now().UTC(),
		Version:     version,
	}
}

// Who is the holder as shown in messages: "root@host (pid 123)".
func (i LockInfo) Who() string {
	if i.User != "" && i.Host != "" && i.PID != 0 {
		if i.InContainer {
			return fmt.Sprintf("%s@%s (pid %d in a container)", i.User, i.Host, i.PID)
		}
		return fmt.Sprintf("%s@%s (pid %d)", i.User, i.Host, i.PID)
	}
	if i.Holder != "" {
		return i.Holder
	}
	return "an unknown holder"
}

// Lock is a held application lock; pass it to every write.
type Lock struct {
	App  string
	Info LockInfo
	// Scope names the lock itself rather than this holding of it: the same
	// for every holder of this application's lock in this storage, whatever
	// path, mount or endpoint it reaches the storage by (the file backend:
	// the lock file's device and inode; etcd: the cluster ID and the key).
	// What a run starts is labelled with Scope and Info.ID, so that a later
	// holder of the same lock knows that run no longer holds it.
	Scope string
	// Previous is the holder before this one when it ended without releasing
	// the lock (killed, crashed) and the OS released it; nil otherwise.
	Previous *LockInfo
}

// ErrLocked matches (errors.Is) a *LockedError.
var ErrLocked = errors.New("state is locked")

// ErrLockNotHeld is returned by a write whose lock is no longer held.
var ErrLockNotHeld = errors.New("state lock is no longer held")

// LockedError is returned when someone else holds an application's lock.
type LockedError struct {
	App  string
	Info LockInfo
	// Hint says how this backend's lock ends and what may be done about it.
	Hint string
}

func (e *LockedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "state for app %q is locked by %s", e.App, e.Info.Who())
	if e.Info.Operation != "" {
		fmt.Fprintf(&b, " for %s", e.Info.Operation)
	}
	if !e.Info.Created.IsZero() {
		fmt.Fprintf(&b, " since %s", e.Info.Created.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "; lock ID %s", e.Info.ID)
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Acquire takes app's lock, retrying while it is held by someone else until
// timeout has passed (--lock-timeout; 0 means try once). The error after
// the timeout is the last *LockedError, saying how long it waited.
func Acquire(ctx context.Context, s Store, app string, info LockInfo, timeout time.Duration) (*Lock, error) {
	return AcquireWaiting(ctx, s, app, info, timeout, nil)
}

// AcquireWaiting is Acquire that tells waiting (when not nil), once, who
// holds the lock when it finds it held and is about to wait for it: a
// command that waits says for whom (a reconciler's cycle, another deploy).
func AcquireWaiting(ctx context.Context, s Store, app string, info LockInfo, timeout time.Duration, waiting func(held *LockedError)) (*Lock, error) {
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		l, err := s.Lock(ctx, app, info)
		if err == nil || !errors.Is(err, ErrLocked) {
			return l, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			if timeout > 0 {
				return nil, fmt.Errorf("waited %s for the lock: %w", timeout, err)
			}
			return nil, err
		}
		if held := (*LockedError)(nil); attempt == 0 && waiting != nil && errors.As(err, &held) {
			waiting(held)
		}
		// 50 ms, doubling, at most 1 s.
		wait := min(backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}.Delay(attempt, 0), left)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for the lock: %w (%w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// DefaultDir is the file backend's default state directory, relative to
// the working directory.
const DefaultDir = ".gcompose/state"

// Open returns the store of this package a --state URL names:
//
//	""                 the file backend in DefaultDir
//	file://PATH, PATH  the file backend in directory PATH
//	mem://             a new, empty in-memory store (tests)
//
// etcd:// URLs are opened by package stateurl, which knows both; here they
// are an unknown scheme like any other.
func Open(url string, opts Options) (Store, error) {
	switch {
	case url == "":
		return NewFileStore(DefaultDir, opts)
	case strings.HasPrefix(url, "file://"):
		p := strings.TrimPrefix(url, "file://")
		if p == "" {
			return nil, fmt.Errorf("state URL %q: empty path", url)
		}
		return NewFileStore(p, opts)
	case url == "mem://" || url == "memory://":
		return NewMemoryStore(), nil
	case strings.Contains(url, "://"):
		return nil, fmt.Errorf("state URL %q: unknown scheme (supported: file://PATH or a directory path)", url)
	default:
		return NewFileStore(url, opts)
	}
}

// ErrMissingDocument matches (errors.Is) a *MissingDocumentError.
var ErrMissingDocument = errors.New("state document missing")

// MissingDocumentError is returned by Load when an application's state has
// no document but traces of one exist: a backup or a journal without it
// (file), resource keys without a head or a head whose generation holds
// nothing (etcd). Planning from an empty state then would create every
// resource a second time, so it is an error, never a fresh start.
type MissingDocumentError struct {
	App   string
	Where string
	// Found describes each trace ("APP.json.backup (serial 7, lineage …)").
	Found []string
	// Aside says what a forced new state does with the traces.
	Aside string
}

func (e *MissingDocumentError) Error() string {
	return fmt.Sprintf("the state of app %q in %s has no document, but traces of one were found: %s. "+
		"Planning from nothing would create every resource a second time (on Golem: rent every service again). "+
		"Rebuild the state from them with gcompose state recover --app %s, or start a new state anyway with deploy --force-new-state (%s; what the old state recorded is then no longer known to gcompose)",
		e.App, e.Where, strings.Join(e.Found, "; "), e.App, e.Aside)
}

// Is makes errors.Is(err, ErrMissingDocument) true.
func (e *MissingDocumentError) Is(target error) bool { return target == ErrMissingDocument }
