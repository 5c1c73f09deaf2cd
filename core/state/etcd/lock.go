package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
)

func heldKey(app, id string) string { return app + "\x00" + id }

func (s *Store) ttlSeconds() int64 {
	sec := int64((s.cfg.LockTTL + time.Second - 1) / time.Second)
	return max(sec, 1)
}

// Lock implements state.Store.
func (s *Store) Lock(ctx context.Context, app string, info state.LockInfo) (*state.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if app == "" {
		return nil, errors.New("empty application name")
	}
	if info.ID == "" {
		info.ID = state.NewID()
	}
	if info.Created.IsZero() {
		info.Created = time.Now().UTC()
	}
	val, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("state for app %q: lock info: %w", app, err)
	}
	what := fmt.Sprintf("state for app %q in %s: lock", app, s.where)
	var lease clientv3.LeaseID
	if err := s.retry(ctx, what, func(ctx context.Context, _ int) error {
		g, err := s.cli.Grant(ctx, s.ttlSeconds())
		if err != nil {
			return err
		}
		lease = g.ID
		return nil
	}); err != nil {
		return nil, fmt.Errorf("%s: lease: %w", what, err)
	}
	revoke := func() {
		rctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		_, _ = s.cli.Revoke(rctx, lease)
	}
	key := s.lockKey(app)
	var createRev int64
	var cluster uint64
	var lockedBy *state.LockInfo
	err = s.retry(ctx, what, func(ctx context.Context, _ int) error {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		cluster = resp.Header.ClusterId
		if resp.Succeeded {
			createRev = resp.Header.Revision
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return fmt.Errorf("lock key %s vanished between compare and read: %w", key, errTryAgain)
		}
		if kvs[0].Lease == int64(lease) {
			// An earlier attempt of ours committed before the connection broke.
			createRev = kvs[0].CreateRevision
			return nil
		}
		var li state.LockInfo
		if err := json.Unmarshal(kvs[0].Value, &li); err != nil {
			return fmt.Errorf("lock key %s holds invalid JSON (%v); remove it with etcdctl del %s", key, err, key)
		}
		lockedBy = &li
		return nil
	})
	if err != nil {
		revoke()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if lockedBy != nil {
		revoke()
		return nil, &state.LockedError{App: app, Info: *lockedBy, Hint: fmt.Sprintf(
			"it lasts while its holder renews its lease: a holder that ended loses it within %s (--etcd-lock-ttl); gcompose unlock %s removes it at once",
			time.Duration(s.ttlSeconds())*time.Second, lockedBy.ID)}
	}
	kctx, stop := context.WithCancel(s.ctx)
	h := &held{app: app, id: info.ID, createRev: createRev, lease: lease, stop: stop}
	s.mu.Lock()
	s.held[heldKey(app, info.ID)] = h
	s.mu.Unlock()
	go s.keepAlive(kctx, h)
	// The cluster ID, not the endpoints: every client of this cluster,
	// whatever address it uses, names the same lock.
	return &state.Lock{App: app, Info: info, Scope: fmt.Sprintf("etcd:%x:%s", cluster, key)}, nil
}

// holder returns the held lock l is, reading the lock key when this store
// did not take it (a lock taken through another Store value). It fails with
// ErrLockNotHeld when l is not the application's lock.
func (s *Store) holder(ctx context.Context, l *state.Lock) (*held, error) {
	if l == nil {
		return nil, errors.New("state write without a lock")
	}
	s.mu.Lock()
	h := s.held[heldKey(l.App, l.Info.ID)]
	s.mu.Unlock()
	if h != nil {
		return h, nil
	}
	var kv *lockKV
	err := s.retry(ctx, "read lock", func(ctx context.Context, _ int) error {
		var err error
		kv, err = s.readLock(ctx, l.App)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state for app %q in %s: %w", l.App, s.where, err)
	}
	if kv == nil || kv.info.ID != l.Info.ID {
		return nil, s.notHeld(l, kv)
	}
	h = &held{app: l.App, id: l.Info.ID, createRev: kv.createRev}
	s.mu.Lock()
	if h2 := s.held[heldKey(l.App, l.Info.ID)]; h2 != nil {
		h = h2
	} else {
		s.held[heldKey(l.App, l.Info.ID)] = h
	}
	s.mu.Unlock()
	return h, nil
}

// forget drops h: its lock is gone.
func (s *Store) forget(h *held) {
	s.mu.Lock()
	if s.held[heldKey(h.app, h.id)] == h {
		delete(s.held, heldKey(h.app, h.id))
	}
	s.mu.Unlock()
	if h.stop != nil {
		h.stop()
		rctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		defer cancel()
		_, _ = s.cli.Revoke(rctx, h.lease)
	}
}

// keepAlive renews h's lease every third of its TTL until ctx ends. While
// etcd cannot be reached it tries again every keepAliveRetry, however long
// that lasts: etcd gives every lease its whole TTL again when it starts (or
// elects a leader), so a holder that renews within that TTL of etcd coming
// back keeps its lock. (etcd's own KeepAlive gives up once a TTL passes
// without an answer, and the lock was then lost seconds after etcd
// returned.) Only etcd saying the lease is gone ends it early: the lock is
// lost, and the next write says so.
func (s *Store) keepAlive(ctx context.Context, h *held) {
	ttl := time.Duration(s.ttlSeconds()) * time.Second
	every := max(ttl/3, 100*time.Millisecond)
	failing := time.Time{}
	for {
		actx, cancel := context.WithTimeout(ctx, min(attemptTimeout, every))
		_, err := s.cli.KeepAliveOnce(actx, h.lease)
		cancel()
		wait := every
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			if !failing.IsZero() {
				s.log.Info("state lock lease renewed again", "app", h.app, "lock", h.id, "after", time.Since(failing).Round(time.Millisecond))
				failing = time.Time{}
			}
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.log.Warn("state lock lease expired: the lock is lost, and later writes are refused",
				"app", h.app, "lock", h.id, "where", s.where, "ttl", ttl)
			return
		default:
			if failing.IsZero() {
				failing = time.Now()
				s.log.Warn("state lock lease cannot be renewed now; retrying until etcd answers", "app", h.app, "lock", h.id, "where", s.where, "err", err)
			}
			wait = keepAliveRetry
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// keepAliveRetry is how often a lease renewal is tried while etcd does not
// answer.
const keepAliveRetry = 250 * time.Millisecond

type lockKV struct {
	info      state.LockInfo
	createRev int64
	modRev    int64
	lease     int64
}

func (s *Store) readLock(ctx context.Context, app string) (*lockKV, error) {
	resp, err := s.cli.Get(ctx, s.lockKey(app))
	if err != nil {
		return nil, err
	}
	return parseLock(s.lockKey(app), resp.Kvs)
}

func parseLock(key string, kvs []*mvccKV) (*lockKV, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	kv := kvs[0]
	l := &lockKV{createRev: kv.CreateRevision, modRev: kv.ModRevision, lease: kv.Lease}
	if err := json.Unmarshal(kv.Value, &l.info); err != nil {
		return nil, fmt.Errorf("lock key %s holds invalid JSON (%v); remove it with etcdctl del %s", key, err, key)
	}
	return l, nil
}

// notHeld is the error of a write whose lock l is gone; cur is the lock now
// (nil: none).
func (s *Store) notHeld(l *state.Lock, cur *lockKV) error {
	why := "it was released, force-unlocked, or its lease expired"
	if cur != nil {
		why = fmt.Sprintf("it is now held by %s for %s, lock ID %s", cur.info.Who(), cur.info.Operation, cur.info.ID)
	}
	return fmt.Errorf("state for app %q in %s, lock %s: %w: %s", l.App, s.where, l.Info.ID, state.ErrLockNotHeld, why)
}

// fenceFailed builds the error of a transaction whose lock compare failed,
// from the lock key read in its Else branch.
func (s *Store) fenceFailed(l *state.Lock, h *held, kvs []*mvccKV) error {
	s.forget(h)
	cur, err := parseLock(s.lockKey(l.App), kvs)
	if err != nil {
		return fmt.Errorf("%w (and %v)", s.notHeld(l, nil), err)
	}
	return s.notHeld(l, cur)
}

// Unlock implements state.Store.
func (s *Store) Unlock(ctx context.Context, l *state.Lock) error {
	h, err := s.holder(ctx, l)
	if err != nil {
		return err
	}
	key := s.lockKey(l.App)
	what := fmt.Sprintf("state for app %q in %s: unlock", l.App, s.where)
	var gone []*mvccKV
	err = s.retry(ctx, what, func(ctx context.Context, attempt int) error {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", h.createRev)).
			Then(clientv3.OpDelete(key)).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if attempt > 0 && len(kvs) == 0 {
				return nil // our first attempt deleted it
			}
			gone = kvs
			if gone == nil {
				gone = []*mvccKV{}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if gone != nil {
		return s.fenceFailed(l, h, gone)
	}
	s.forget(h)
	return nil
}

// ForceUnlock implements state.Store.
func (s *Store) ForceUnlock(ctx context.Context, app, lockID string) error {
	key := s.lockKey(app)
	what := fmt.Sprintf("unlock: state for app %q in %s", app, s.where)
	var cur *lockKV
	if err := s.retry(ctx, what, func(ctx context.Context, _ int) error {
		var err error
		cur, err = s.readLock(ctx, app)
		return err
	}); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if cur == nil {
		return fmt.Errorf("%s is not locked", what)
	}
	if cur.info.ID != lockID {
		return fmt.Errorf("%s is locked with ID %s (by %s), not %s", what, cur.info.ID, cur.info.Who(), lockID)
	}
	var deleted bool
	err := s.retry(ctx, what, func(ctx context.Context, attempt int) error {
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", cur.createRev)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return err
		}
		deleted = resp.Succeeded || attempt > 0
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !deleted {
		return fmt.Errorf("%s: lock %s was released while being removed", what, lockID)
	}
	// The lease only kept the lock key; revoking it frees it at once.
	if cur.lease != 0 {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _ = s.cli.Revoke(rctx, clientv3.LeaseID(cur.lease))
	}
	return nil
}

// LockInfo implements state.Store.
func (s *Store) LockInfo(ctx context.Context, app string) (*state.LockInfo, error) {
	var cur *lockKV
	if err := s.retry(ctx, "read lock", func(ctx context.Context, _ int) error {
		var err error
		cur, err = s.readLock(ctx, app)
		return err
	}); err != nil {
		return nil, fmt.Errorf("state for app %q in %s: lock: %w", app, s.where, err)
	}
	if cur == nil {
		return nil, nil
	}
	i := cur.info
	return &i, nil
}

// LeaseTTL returns the remaining time to live of the lease holding app's
// lock (0 when unlocked): how long a holder that stopped renewing keeps it.
func (s *Store) LeaseTTL(ctx context.Context, app string) (time.Duration, error) {
	cur, err := s.readLock(ctx, app)
	if err != nil || cur == nil || cur.lease == 0 {
		return 0, err
	}
	r, err := s.cli.TimeToLive(ctx, clientv3.LeaseID(cur.lease))
	if err != nil {
		return 0, fmt.Errorf("state for app %q in %s: lease: %w", app, s.where, err)
	}
	return time.Duration(r.TTL) * time.Second, nil
}

// ---- reads
