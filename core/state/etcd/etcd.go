// Package etcd implements state.Store on etcd v3.
//
// Layout, under a key prefix P (for example "/gcompose"), per application A
// (names are path-escaped, so they never contain "/"):
//
//	P/apps/A/head               {format_version, lineage, serial, app, updated_at, generation, write_id}
//	P/apps/A/lock               the LockInfo JSON, attached to the holder's lease
//	P/apps/A/gen/G/res/NAME     one resource's JSON, G = the head's generation (16 hex digits)
//
// One key per resource and a small head, never one growing blob: every
// request stays far below etcd's request limit (1.5 MiB by default) whatever
// the number of resources. An Apply is one transaction that puts or deletes
// the resources it changes and rewrites the head with serial+1. Load reads the
// head and then the resources of its generation at the head's revision, so it
// never sees half of a write.
//
// A write too big for one transaction (more changes than MaxTxnOps, or more
// bytes than MaxTxnBytes, and every Replace) writes a new generation in
// batches that no reader looks at, then switches the head to it and deletes
// the old generation in one last transaction.
//
// Locking is a lease: the lock key is created only if absent and attached to a
// lease that a keepalive renews while the lock is held (LockTTL, default 15 s).
// A holder that crashes stops renewing; its lock disappears with its lease.
// Every write is a transaction that compares the lock key's create revision
// with the one this holder created: a holder whose lease expired or whose lock
// was force-unlocked (and maybe taken since) gets state.ErrLockNotHeld and
// writes nothing.
package etcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/gcompose/gcompose/core/state"
)

// Defaults.
const (
	DefaultPrefix      = "/gcompose"
	DefaultLockTTL     = 15 * time.Second
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxTxnOps stays below etcd's --max-txn-ops default (128).
	DefaultMaxTxnOps = 100
	// DefaultMaxTxnBytes stays below etcd's --max-request-bytes default (1.5 MiB).
	DefaultMaxTxnBytes = 1 << 20
	// DefaultPageSize is how many resources one Load request returns.
	DefaultPageSize = 500
)

// Config says where etcd is and how to talk to it.
type Config struct {
	// Endpoints are the members' client URLs ("http://127.0.0.1:2379") or
	// host:port pairs.
	Endpoints []string
	// Prefix is put before every key ("/gcompose" when empty).
	Prefix string
	// TLS: file names of the CA certificate, the client certificate and its
	// key (PEM). TLS is used when any is set, or when TLS is true.
	CACert, Cert, Key string
	TLS               bool
	// Username and Password for etcd's authentication (optional). The
	// password never appears in an error or a log.
	Username, Password string
	// DialTimeout bounds the connection check New makes (DefaultDialTimeout).
	DialTimeout time.Duration
	// LockTTL is the lock lease's time to live: a holder that stops renewing
	// it (crash, network partition) loses the lock after this long
	// (DefaultLockTTL; etcd counts in whole seconds, at least 1).
	LockTTL time.Duration
	// RetryTimeout bounds how long a request is retried while etcd is
	// unavailable (a member down, a leader election, an outage): 2 minutes
	// when zero. The lock survives the wait: its lease is renewed as soon
	// as etcd answers again (keepAlive).
	RetryTimeout time.Duration
	// MaxTxnOps, MaxTxnBytes and PageSize tune request sizes (defaults above).
	MaxTxnOps, MaxTxnBytes, PageSize int
	// Logger receives warnings (nil: slog.Default()).
	Logger *slog.Logger
}

// Store is a state.Store on etcd.
type Store struct {
	cli       *clientv3.Client
	cfg       Config
	where     string // "etcd at host:2379,host2:2379 prefix /p", for errors
	log       *slog.Logger
	ctx       context.Context // lives until Close: lock keepalives
	cancel    context.CancelFunc
	mu        sync.Mutex
	held      map[string]*held // by app + "\x00" + lock ID
	stats     *stats
	closeOnce sync.Once
}

// held is a lock this store knows: its key's create revision (the fence),
// its lease session (nil for a lock taken by another Store value) and the
// head as this holder last wrote it.
type held struct {
	mu        sync.Mutex // serializes this holder's writes
	qmu       sync.Mutex // guards queue
	queue     []*applyReq
	app       string
	id        string
	createRev int64
	lease     clientv3.LeaseID   // 0 for a lock taken by another Store value
	stop      context.CancelFunc // ends the keepalive (nil: none)
	head      *head              // nil until read
	headRev   int64              // the head key's ModRevision (0: no head)
}

// head is the small record per application.
type head struct {
	FormatVersion int       `json:"format_version"`
	Lineage       string    `json:"lineage"`
	Serial        uint64    `json:"serial"`
	App           string    `json:"app"`
	UpdatedAt     time.Time `json:"updated_at"`
	// Generation names the key range holding the resources.
	Generation uint64 `json:"generation"`
	// WriteID identifies the write that stored this head, so that a write
	// retried after an ambiguous failure (a member went down while it was
	// in flight) can tell whether its first attempt committed.
	WriteID string `json:"write_id"`
	// GenCopy: the same head is also stored in its generation (genHeadKey),
	// in the same transaction. A generation then always holds at least its
	// copy: a head pointing at an empty generation is damage, and resource
	// keys whose head was lost still say their lineage and serial.
	GenCopy bool `json:"gen_copy,omitempty"`
}

// New connects to etcd and checks that it answers (within DialTimeout).
func New(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd state store: no endpoints")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	cfg.Prefix = "/" + strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix == "/" {
		cfg.Prefix = ""
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = DefaultLockTTL
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = 2 * time.Minute
	}
	if cfg.MaxTxnOps <= 1 {
		cfg.MaxTxnOps = DefaultMaxTxnOps
	}
	if cfg.MaxTxnBytes <= 0 {
		cfg.MaxTxnBytes = DefaultMaxTxnBytes
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	prefixShown := cfg.Prefix
	if prefixShown == "" {
		prefixShown = "/"
	}
	where := fmt.Sprintf("etcd at %s prefix %s", strings.Join(cfg.Endpoints, ","), prefixShown)

	useTLS := cfg.TLS || cfg.CACert != "" || cfg.Cert != "" || cfg.Key != ""
	endpoints := make([]string, len(cfg.Endpoints))
	for i, e := range cfg.Endpoints {
		switch {
		case strings.Contains(e, "://"):
			endpoints[i] = e
		case useTLS:
			endpoints[i] = "https://" + e
		default:
			endpoints[i] = "http://" + e
		}
	}
	ccfg := clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: cfg.DialTimeout,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      zap.NewNop(),
		// Keepalive pings let the client notice a dead member and fail over.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// gRPC's default reconnect backoff grows to two minutes: after an
		// outage of half a minute the client would wait many seconds more
		// before even trying a member that is back. A short cap makes it
		// reconnect within about a second of etcd returning.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	}
	if useTLS {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		ccfg.TLS = tc
	}
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	s := &Store{cli: cli, cfg: cfg, where: where, log: log, ctx: bctx, cancel: cancel, held: map[string]*held{}, stats: &stats{}}
	cctx, ccancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer ccancel()
	if _, err := cli.Get(cctx, s.key("apps/"), clientv3.WithLimit(1), clientv3.WithKeysOnly()); err != nil {
		s.Close()
		return nil, fmt.Errorf("%s: connecting: %w", where, err)
	}
	return s, nil
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CACert != "" {
		pem, err := os.ReadFile(cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s: no PEM certificate found", cfg.CACert)
		}
		tc.RootCAs = pool
	}
	if (cfg.Cert == "") != (cfg.Key == "") {
		return nil, errors.New("TLS client certificate and key go together: set both or neither")
	}
	if cfg.Cert != "" {
		c, err := tls.LoadX509KeyPair(cfg.Cert, cfg.Key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s, key %s: %w", cfg.Cert, cfg.Key, err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// Close closes the connection. Locks still held are not released: their
// leases are no longer renewed and expire after LockTTL.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.mu.Lock()
		for _, h := range s.held {
			if h.stop != nil {
				h.stop()
			}
		}
		s.held = map[string]*held{}
		s.mu.Unlock()
		s.cancel()
		err = s.cli.Close()
	})
	if err != nil {
		return fmt.Errorf("%s: close: %w", s.where, err)
	}
	return nil
}

// Where describes the store for messages ("etcd at h:2379 prefix /p").
func (s *Store) Where() string { return s.where }

// Client is the etcd client (tests, tools).
func (s *Store) Client() *clientv3.Client { return s.cli }

// ---- keys

func (s *Store) key(rel string) string { return s.cfg.Prefix + "/" + rel }

func (s *Store) appPrefix(app string) string { return s.key("apps/" + url.PathEscape(app) + "/") }

func (s *Store) headKey(app string) string { return s.appPrefix(app) + "head" }

func (s *Store) lockKey(app string) string { return s.appPrefix(app) + "lock" }

func (s *Store) genPrefix(app string) string { return s.appPrefix(app) + "gen/" }

func (s *Store) resPrefix(app string, gen uint64) string {
	return fmt.Sprintf("%s%016x/res/", s.genPrefix(app), gen)
}

func (s *Store) resKey(app string, gen uint64, name string) string {
	return s.resPrefix(app, gen) + url.PathEscape(name)
}

func (s *Store) genKeys(app string, gen uint64) string {
	return fmt.Sprintf("%s%016x/", s.genPrefix(app), gen)
}

// genHeadKey is the copy of the head kept in its generation.
func (s *Store) genHeadKey(app string, gen uint64) string { return s.genKeys(app, gen) + "head" }

// ---- retries

// retryable says whether err is etcd being unavailable for a moment (a
// member stopped, no leader yet) rather than an answer.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // the attempt's own timeout (the caller's is checked apart)
	}
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrNotCapable} {
		if errors.Is(err, e) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// retry runs op until it succeeds, fails for good, or etcd stays
// unavailable for RetryTimeout. attempt counts from 0; a write uses it to
// know that an earlier attempt may have committed.
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context, attempt int) error) error {
	return s.retryEach(ctx, what, attemptTimeout, op)
}

// attemptTimeout bounds one request: a member that stopped answering
// without closing the connection is given up on and another one tried.
const attemptTimeout = 5 * time.Second

// retryEach is retry with a timeout per attempt (a Load reads many pages in
// one attempt).
func (s *Store) retryEach(ctx context.Context, what string, each time.Duration, op func(ctx context.Context, attempt int) error) error {
	deadline := time.Now().Add(s.cfg.RetryTimeout)
	delay := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, each)
		err := op(actx, attempt)
		cancel()
		if err == nil || !retryable(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, ctx.Err())
			}
			return err
		}
		s.stats.retries.Add(1)
		s.log.Debug("etcd unavailable, retrying", "what", what, "attempt", attempt, "err", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

// ---- locks

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
			return status.Error(codes.Unavailable, "lock key vanished between compare and read") // try again
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

// readHead reads app's head; nil when the application has no state.
func (s *Store) readHead(ctx context.Context, app string, opts ...clientv3.OpOption) (*head, int64, int64, error) {
	resp, err := s.cli.Get(ctx, s.headKey(app), opts...)
	if err != nil {
		return nil, 0, 0, err
	}
	s.stats.response(proto.Size((*pb.RangeResponse)(resp)))
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, nil
	}
	hd, err := s.parseHead(app, resp.Kvs[0].Value)
	return hd, resp.Kvs[0].ModRevision, resp.Header.Revision, err
}

func (s *Store) parseHead(app string, b []byte) (*head, error) {
	var hd head
	if err := decodeStrict(b, &hd); err != nil {
		return nil, fmt.Errorf("state head %s in %s: %v: %w", s.headKey(app), s.where, err, state.ErrCorrupt)
	}
	if hd.FormatVersion > state.FormatVersion {
		return nil, fmt.Errorf("state head %s in %s has format version %d; this gcompose reads up to %d: upgrade gcompose", s.headKey(app), s.where, hd.FormatVersion, state.FormatVersion)
	}
	return &hd, nil
}

// Load implements state.Store: the head, then its generation's resources
// page by page, all at the head's revision.
func (s *Store) Load(ctx context.Context, app string) (*state.Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("state for app %q in %s: load", app, s.where)
	var doc *state.Document
	err := s.retryEach(ctx, what, 10*time.Minute, func(ctx context.Context, _ int) error {
		d, err := s.load(ctx, app)
		if errors.Is(err, rpctypes.ErrCompacted) {
			// etcd compacted the revision we read at: read again from the head.
			return status.Error(codes.Unavailable, "revision compacted during load")
		}
		doc = d
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return doc, nil
}

func (s *Store) load(ctx context.Context, app string) (*state.Document, error) {
	hctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	hd, _, rev, err := s.readHead(hctx, app)
	cancel()
	if err != nil {
		return nil, err
	}
	doc := state.NewDocument(app)
	if hd == nil {
		// No head: resource keys without one are what is left of a state.
		if found, err := s.traces(ctx, app, rev, nil); err != nil || len(found) > 0 {
			return nil, s.missing(app, found, err)
		}
		return doc, nil
	}
	doc.Lineage, doc.Serial, doc.UpdatedAt = hd.Lineage, hd.Serial, hd.UpdatedAt
	prefix := s.genKeys(app, hd.Generation)
	resPrefix := s.resPrefix(app, hd.Generation)
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	keys := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		resp, err := s.cli.Get(pctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(int64(s.cfg.PageSize)))
		cancel()
		if err != nil {
			return nil, err
		}
		s.stats.response(proto.Size((*pb.RangeResponse)(resp)))
		keys += len(resp.Kvs)
		for _, kv := range resp.Kvs {
			if !strings.HasPrefix(string(kv.Key), resPrefix) {
				if err := s.checkGenHead(app, hd, kv); err != nil {
					return nil, err
				}
				continue
			}
			r, err := state.DecodeResource(kv.Value)
			if err != nil {
				return nil, fmt.Errorf("resource key %s in %s: %v: %w", kv.Key, s.where, err, state.ErrCorrupt)
			}
			if r.Name == "" {
				return nil, fmt.Errorf("resource key %s in %s: no name: %w", kv.Key, s.where, state.ErrCorrupt)
			}
			doc.Resources[r.Name] = r
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if keys == 0 && (hd.GenCopy || hd.Serial > 0) {
		// The generation the head names holds nothing: damage if the head
		// says it keeps a copy there, or if resources are elsewhere.
		found, err := s.traces(ctx, app, rev, &hd.Generation)
		if err != nil {
			return nil, err
		}
		if hd.GenCopy || len(found) > 0 {
			found = append([]string{fmt.Sprintf("head %s (serial %d, lineage %s) points at generation %d, which holds nothing",
				s.headKey(app), hd.Serial, hd.Lineage, hd.Generation)}, found...)
			return nil, s.missing(app, found, nil)
		}
	}
	return doc, nil
}

// checkGenHead checks the copy of the head in its generation: written in
// the same transaction, it differs only if a key was changed by hand.
func (s *Store) checkGenHead(app string, hd *head, kv *mvccKV) error {
	if string(kv.Key) != s.genHeadKey(app, hd.Generation) {
		return fmt.Errorf("unexpected key %s in %s: %w", kv.Key, s.where, state.ErrCorrupt)
	}
	cp, err := s.parseHead(app, kv.Value)
	if err != nil {
		return err
	}
	if cp.WriteID != hd.WriteID || cp.Serial != hd.Serial || cp.Lineage != hd.Lineage {
		return fmt.Errorf("head %s (serial %d, write %s) and its copy %s (serial %d, write %s) differ: one was changed by hand: %w",
			s.headKey(app), hd.Serial, hd.WriteID, kv.Key, cp.Serial, cp.WriteID, state.ErrCorrupt)
	}
	return nil
}

// missing is the error of a state whose head is lost or points at nothing.
func (s *Store) missing(app string, found []string, err error) error {
	if err != nil {
		return err
	}
	return &state.MissingDocumentError{App: app, Where: s.where, Found: found,
		Aside: "the keys of other generations are deleted when that run ends; save them first with gcompose state recover --dry-run"}
}

// generation is one generation's keys, as traces and Recover see them.
type generation struct {
	gen       uint64
	head      *head // its copy of the head, if any
	resources int
	maxRev    int64
}

// generations reads every key under app's gen/ prefix (at revision rev, 0:
// now), grouped by generation, skipping skip.
func (s *Store) generations(ctx context.Context, app string, rev int64, skip *uint64, each func(g *generation, kv *mvccKV)) ([]*generation, error) {
	prefix := s.genPrefix(app)
	end := clientv3.GetPrefixRangeEnd(prefix)
	byGen := map[uint64]*generation{}
	from := prefix
	for {
		var resp *clientv3.GetResponse
		err := s.retry(ctx, "read generations", func(ctx context.Context, _ int) error {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.cfg.PageSize))}
			if rev > 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			var err error
			resp, err = s.cli.Get(ctx, from, opts...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("state for app %q in %s: %w", app, s.where, err)
		}
		for _, kv := range resp.Kvs {
			rest := strings.TrimPrefix(string(kv.Key), prefix)
			var gen uint64
			if n, _ := fmt.Sscanf(rest, "%016x/", &gen); n != 1 || (skip != nil && gen == *skip) {
				continue
			}
			g := byGen[gen]
			if g == nil {
				g = &generation{gen: gen}
				byGen[gen] = g
			}
			g.maxRev = max(g.maxRev, kv.ModRevision)
			if strings.HasSuffix(rest, "/head") {
				if hd, err := s.parseHead(app, kv.Value); err == nil {
					g.head = hd
				}
			} else {
				g.resources++
			}
			if each != nil {
				each(g, kv)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	out := make([]*generation, 0, len(byGen))
	for _, g := range byGen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gen < out[j].gen })
	return out, nil
}

// traces describes the generations (other than skip) that hold keys.
func (s *Store) traces(ctx context.Context, app string, rev int64, skip *uint64) ([]string, error) {
	gens, err := s.generations(ctx, app, rev, skip, nil)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, g := range gens {
		d := fmt.Sprintf("%s: %d resource keys", s.genKeys(app, g.gen), g.resources)
		if g.head != nil {
			d += fmt.Sprintf(" (serial %d, lineage %s)", g.head.Serial, g.head.Lineage)
		}
		found = append(found, d)
	}
	return found, nil
}

// Apps implements state.Store: applications with a head (at least one
// write), or with resource keys left without one. It reads one key per
// application, skipping over their resources.
func (s *Store) Apps(ctx context.Context) ([]string, error) {
	base := s.key("apps/")
	end := clientv3.GetPrefixRangeEnd(base)
	var out []string
	from := base
	for {
		var resp *clientv3.GetResponse
		if err := s.retry(ctx, "list apps", func(ctx context.Context, _ int) error {
			var err error
			resp, err = s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
			return err
		}); err != nil {
			return nil, fmt.Errorf("list applications in %s: %w", s.where, err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		rest := strings.TrimPrefix(string(resp.Kvs[0].Key), base)
		esc, _, ok := strings.Cut(rest, "/")
		if !ok {
			// A stray key directly under apps/: skip it.
			from = string(resp.Kvs[0].Key) + "\x00"
			continue
		}
		app, err := url.PathUnescape(esc)
		if err != nil {
			app = esc
		}
		var n int64
		if err := s.retry(ctx, "list apps", func(ctx context.Context, _ int) error {
			r, err := s.cli.Get(ctx, base+esc+"/head", clientv3.WithCountOnly())
			if err == nil && r.Count == 0 {
				// Resource keys without a head: a lost state, which Load
				// reports; list it so that it is found.
				r, err = s.cli.Get(ctx, base+esc+"/gen/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithLimit(1))
			}
			if err == nil {
				n = r.Count
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("list applications in %s: %w", s.where, err)
		}
		if n > 0 {
			out = append(out, app)
		}
		from = base + esc + "0" // '0' follows '/': the first key after this app's
	}
	sort.Strings(out)
	return out, nil
}

var _ state.Store = (*Store)(nil)

// decodeStrict decodes a value refusing unknown keys: a typo or a flipped
// byte in a key is damage, not something to ignore.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the end of the JSON value")
	}
	return nil
}
