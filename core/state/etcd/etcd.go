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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

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
	// Ledger is the document's ledger (state.Document.Ledger): what
	// removed resources had cost. It lives in the head, which every write
	// rewrites, as it belongs to no resource key.
	Ledger []state.Ended `json:"ledger,omitempty"`
}

// withEnded is ledger with the entries changes' deletes make appended (a
// copy: the held head stays as it was until the write commits).
func withEnded(ledger []state.Ended, now time.Time, changes ...[]state.Change) []state.Ended {
	out := slices.Clone(ledger)
	for _, chs := range changes {
		for _, ch := range chs {
			if ch.Put == nil {
				if e := ch.Ended("", now); e != nil {
					out = append(out, *e)
				}
			}
		}
	}
	return out
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

var _ state.Store = (*Store)(nil)
