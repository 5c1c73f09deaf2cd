// Package stateurl opens the state store a --state URL names:
//
//	""                                   the file backend in state.DefaultDir
//	PATH, file://PATH                    the file backend in directory PATH
//	mem://                               in memory (tests)
//	etcd://HOST:PORT[,HOST:PORT...]/PREFIX   etcd v3 (package core/state/etcd)
//	etcds://...                          the same over TLS
//
// etcd's TLS files and credentials come from Options or, when empty there,
// from the environment (GCOMPOSE_ETCD_CACERT, GCOMPOSE_ETCD_CERT,
// GCOMPOSE_ETCD_KEY, GCOMPOSE_ETCD_USER, GCOMPOSE_ETCD_PASSWORD,
// GCOMPOSE_ETCD_LOCK_TTL). A password is never accepted in the URL (it would
// show in process lists and shell history) and never appears in an error.
package stateurl

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
)

// Environment variables read for etcd options left empty in Options.
const (
	EnvCACert   = "GCOMPOSE_ETCD_CACERT"
	EnvCert     = "GCOMPOSE_ETCD_CERT"
	EnvKey      = "GCOMPOSE_ETCD_KEY"
	EnvUser     = "GCOMPOSE_ETCD_USER"
	EnvPassword = "GCOMPOSE_ETCD_PASSWORD"
	EnvLockTTL  = "GCOMPOSE_ETCD_LOCK_TTL"
)

// Options configure the store. The Etcd fields apply to etcd:// URLs only.
type Options struct {
	// Logger receives the backends' warnings (nil: slog.Default()).
	Logger *slog.Logger
	// EtcdCACert, EtcdCert, EtcdKey are PEM file names for TLS.
	EtcdCACert, EtcdCert, EtcdKey string
	// EtcdUser and EtcdPassword authenticate to etcd.
	EtcdUser, EtcdPassword string
	// EtcdLockTTL is the lock lease's TTL (etcd.DefaultLockTTL when zero).
	EtcdLockTTL time.Duration
	// EtcdDialTimeout bounds the first connection (etcd.DefaultDialTimeout).
	EtcdDialTimeout time.Duration
	// Getenv reads the environment (nil: os.Getenv).
	Getenv func(string) string
}

// EtcdURL is a parsed etcd:// URL.
type EtcdURL struct {
	Endpoints []string // host:port
	Prefix    string   // "/prefix" (etcd.DefaultPrefix when the URL has none)
	User      string   // from user@host, if any
	TLS       bool     // etcds://
}

// IsEtcd says whether url names the etcd backend.
func IsEtcd(url string) bool {
	return strings.HasPrefix(url, "etcd://") || strings.HasPrefix(url, "etcds://")
}

// Redact returns url with any password replaced by "xxxxx", for messages.
func Redact(url string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	hosts, path, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(hosts, "@")
	if at < 0 {
		return url
	}
	user, _, hasPass := strings.Cut(hosts[:at], ":")
	if !hasPass {
		return url
	}
	out := scheme + "://" + user + ":xxxxx@" + hosts[at+1:]
	if strings.Contains(rest, "/") {
		out += "/" + path
	}
	return out
}

// ParseEtcd parses etcd://[USER@]HOST:PORT[,HOST:PORT...][/PREFIX] (or
// etcds:// for TLS).
func ParseEtcd(url string) (*EtcdURL, error) {
	shown := Redact(url)
	var u EtcdURL
	var rest string
	switch {
	case strings.HasPrefix(url, "etcd://"):
		rest = strings.TrimPrefix(url, "etcd://")
	case strings.HasPrefix(url, "etcds://"):
		rest, u.TLS = strings.TrimPrefix(url, "etcds://"), true
	default:
		return nil, fmt.Errorf("state URL %q: not etcd:// or etcds://", shown)
	}
	hosts, prefix, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		user := hosts[:at]
		hosts = hosts[at+1:]
		if strings.Contains(user, ":") {
			return nil, fmt.Errorf("state URL %q: a password in the URL would show in process lists and shell history; set %s instead", shown, EnvPassword)
		}
		u.User = user
	}
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			return nil, fmt.Errorf("state URL %q: empty host (want etcd://host:2379[,host2:2379]/prefix)", shown)
		}
		if strings.ContainsAny(h, "?#") {
			return nil, fmt.Errorf("state URL %q: unexpected query or fragment in host %q", shown, h)
		}
		if !strings.Contains(h, ":") {
			h += ":2379"
		}
		u.Endpoints = append(u.Endpoints, h)
	}
	prefix = strings.Trim(prefix, "/")
	if strings.ContainsAny(prefix, "?#") {
		return nil, fmt.Errorf("state URL %q: unexpected query or fragment in the prefix", shown)
	}
	if prefix == "" {
		u.Prefix = etcd.DefaultPrefix
	} else {
		u.Prefix = "/" + prefix
	}
	return &u, nil
}

// Open returns the store url names. For etcd it connects and checks that
// etcd answers (within the dial timeout).
func Open(ctx context.Context, url string, opts Options) (state.Store, error) {
	if !IsEtcd(url) {
		return state.Open(url, state.Options{Logger: opts.Logger})
	}
	cfg, err := EtcdConfig(url, opts)
	if err != nil {
		return nil, err
	}
	s, err := etcd.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("state URL %q: %w", Redact(url), err)
	}
	return s, nil
}

// EtcdConfig is the etcd.Config for url and opts (environment included).
func EtcdConfig(url string, opts Options) (etcd.Config, error) {
	u, err := ParseEtcd(url)
	if err != nil {
		return etcd.Config{}, err
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	or := func(v, env string) string {
		if v != "" {
			return v
		}
		return getenv(env)
	}
	cfg := etcd.Config{
		Endpoints:   u.Endpoints,
		Prefix:      u.Prefix,
		TLS:         u.TLS,
		CACert:      or(opts.EtcdCACert, EnvCACert),
		Cert:        or(opts.EtcdCert, EnvCert),
		Key:         or(opts.EtcdKey, EnvKey),
		Username:    or(opts.EtcdUser, EnvUser),
		Password:    or(opts.EtcdPassword, EnvPassword),
		LockTTL:     opts.EtcdLockTTL,
		DialTimeout: opts.EtcdDialTimeout,
		Logger:      opts.Logger,
	}
	if u.User != "" {
		if opts.EtcdUser != "" && opts.EtcdUser != u.User {
			return etcd.Config{}, fmt.Errorf("state URL %q names user %q, the options %q: choose one", Redact(url), u.User, opts.EtcdUser)
		}
		cfg.Username = u.User
	}
	if cfg.LockTTL == 0 {
		if v := getenv(EnvLockTTL); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return etcd.Config{}, fmt.Errorf("%s=%q: want a positive duration such as 15s", EnvLockTTL, v)
			}
			cfg.LockTTL = d
		}
	}
	if cfg.Password != "" && cfg.Username == "" {
		return etcd.Config{}, fmt.Errorf("state URL %q: an etcd password is set (%s) but no user (%s or user@host in the URL)", Redact(url), EnvPassword, EnvUser)
	}
	return cfg, nil
}
