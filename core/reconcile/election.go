package reconcile

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Elector elects one leader among the reconcilers of an application.
type Elector interface {
	// Campaign waits until this reconciler leads, or ctx ends.
	Campaign(ctx context.Context) (Term, error)
}

// Term is one leadership.
type Term interface {
	// Done is closed when the leadership ends: its lease expired or was
	// revoked, or another candidate leads.
	Done() <-chan struct{}
	// Resign gives the leadership up.
	Resign(ctx context.Context) error
	// Describe says which leadership this is, for messages.
	Describe() string
}

// alone leads at once, for as long as it runs: one reconciler, no etcd.
type alone struct{}

func (alone) Campaign(ctx context.Context) (Term, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return aloneTerm{}, nil
}

type aloneTerm struct{}

func (aloneTerm) Done() <-chan struct{}        { return nil }
func (aloneTerm) Resign(context.Context) error { return nil }
func (aloneTerm) Describe() string             { return "alone: no election without etcd" }

// EtcdElector is etcd's election (go.etcd.io/etcd/client/v3/concurrency)
// on a lease of TTL: the leader is the candidate whose key under Key was
// created first; a candidate that stops renewing its lease (killed, cut
// off, paused) loses its key when the lease expires, at most TTL later, and
// the next candidate leads.
//
// Leadership decides who repairs, not who may write: every write a repair
// makes goes through the state lock (core/state/etcd), which is itself a
// lease, renewed by the same process, and fences each write. A leader that
// lost its election lease stops its repair (Reconciler.lead); one that
// could not notice (paused longer than the TTL) has lost its state lock's
// lease too, and its writes are refused (state.ErrLockNotHeld).
type EtcdElector struct {
	Client *clientv3.Client
	// Key is the election's prefix: <state prefix>/reconcile/<app>.
	Key string
	// TTL of the candidates' leases (whole seconds, at least 1).
	TTL time.Duration
	// Holder describes this candidate (its value under Key).
	Holder string
}

// ElectionKey is the election prefix of an application under a state
// prefix; it is outside the state's keys (prefix/apps/...).
func ElectionKey(prefix, app string) string {
	return prefix + "/reconcile/" + app
}

// Campaign implements Elector.
func (e *EtcdElector) Campaign(ctx context.Context) (Term, error) {
	ttl := int((e.TTL + time.Second - 1) / time.Second)
	sess, err := concurrency.NewSession(e.Client, concurrency.WithTTL(max(ttl, 1)))
	if err != nil {
		return nil, fmt.Errorf("election %s: lease: %w", e.Key, err)
	}
	el := concurrency.NewElection(sess, e.Key)
	if err := el.Campaign(ctx, e.Holder); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		// Closing the session revokes its lease: the candidacy is withdrawn.
		_ = el.Resign(cctx)
		sess.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("election %s: %w", e.Key, err)
	}
	t := &etcdTerm{sess: sess, el: el, done: make(chan struct{}), ttl: time.Duration(max(ttl, 1)) * time.Second}
	wctx, cancel := context.WithCancel(e.Client.Ctx())
	t.stop = cancel
	go t.watch(wctx)
	return t, nil
}

type etcdTerm struct {
	sess *concurrency.Session
	el   *concurrency.Election
	ttl  time.Duration
	done chan struct{}
	once sync.Once
	stop context.CancelFunc
}

func (t *etcdTerm) end() { t.once.Do(func() { close(t.done) }) }

// watch ends the term when the session's lease is gone, or when the
// election names another leader (our key was deleted by hand).
func (t *etcdTerm) watch(ctx context.Context) {
	defer t.end()
	obs := t.el.Observe(ctx)
	mine := t.el.Key()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.sess.Done():
			return
		case resp, ok := <-obs:
			if !ok {
				// Observe ends with ctx or when etcd cannot be watched; the
				// lease alone decides then.
				select {
				case <-ctx.Done():
				case <-t.sess.Done():
				}
				return
			}
			if len(resp.Kvs) > 0 && string(resp.Kvs[0].Key) != mine {
				return
			}
		}
	}
}

func (t *etcdTerm) Done() <-chan struct{} { return t.done }

func (t *etcdTerm) Describe() string {
	return fmt.Sprintf("etcd election %s, lease %x, TTL %s", t.el.Key(), int64(t.sess.Lease()), t.ttl)
}

// Resign gives the leadership up and revokes the lease, so that the next
// candidate leads at once rather than after the TTL.
func (t *etcdTerm) Resign(ctx context.Context) error {
	defer t.end()
	defer t.stop()
	err := t.el.Resign(ctx)
	return errors.Join(err, t.sess.Close())
}
