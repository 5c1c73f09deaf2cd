package stateurl_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
	"github.com/gcompose/gcompose/core/stateurl"
)

func TestParseEtcd(t *testing.T) {
	for _, tc := range []struct {
		url, want, err string
	}{
		{url: "etcd://h:2379/p", want: "[h:2379] /p  false"},
		{url: "etcd://h1:1,h2:2,h3/a/b/", want: "[h1:1 h2:2 h3:2379] /a/b  false"},
		{url: "etcd://h:2379", want: "[h:2379] /gcompose  false"},
		{url: "etcds://alice@h:2379/p", want: "[h:2379] /p alice true"},
		{url: "etcd://alice:s3cret@h:2379/p", err: `state URL "etcd://alice:xxxxx@h:2379/p": a password in the URL would show in process lists and shell history; set GCOMPOSE_ETCD_PASSWORD instead`},
		{url: "etcd:///p", err: "empty host"},
		{url: "etcd://h:1,,h:2/p", err: "empty host"},
		{url: "etcd://h:1/p?x=1", err: "query"},
	} {
		u, err := stateurl.ParseEtcd(tc.url)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.url, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the error shows the password: %v", tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got := fmt.Sprintf("%v %s %s %v", u.Endpoints, u.Prefix, u.User, u.TLS); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
	}
}

func TestEtcdConfigFromEnvironment(t *testing.T) {
	env := map[string]string{
		stateurl.EnvCACert: "/ca.pem", stateurl.EnvCert: "/c.pem", stateurl.EnvKey: "/k.pem",
		stateurl.EnvUser: "bob", stateurl.EnvPassword: "pw-from-env", stateurl.EnvLockTTL: "7s",
	}
	getenv := func(k string) string { return env[k] }
	cfg, err := stateurl.EtcdConfig("etcd://h:1/p", stateurl.Options{Getenv: getenv, EtcdKey: "/flag-key.pem"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CACert != "/ca.pem" || cfg.Cert != "/c.pem" || cfg.Key != "/flag-key.pem" || cfg.Username != "bob" || cfg.Password != "pw-from-env" || cfg.LockTTL != 7*time.Second {
		t.Fatalf("config = %+v", cfg)
	}
	env[stateurl.EnvLockTTL] = "soon"
	if _, err := stateurl.EtcdConfig("etcd://h:1/p", stateurl.Options{Getenv: getenv}); err == nil || !strings.Contains(err.Error(), stateurl.EnvLockTTL) {
		t.Fatalf("bad TTL: %v", err)
	}
	delete(env, stateurl.EnvLockTTL)
	delete(env, stateurl.EnvUser)
	_, err = stateurl.EtcdConfig("etcd://h:1/p", stateurl.Options{Getenv: getenv})
	if err == nil || strings.Contains(err.Error(), "pw-from-env") {
		t.Fatalf("password without user: %v", err)
	}
}

func TestOpenFileAndMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{dir, "file://" + dir, "mem://"} {
		s, err := stateurl.Open(ctx, url, stateurl.Options{})
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		switch s.(type) {
		case *state.FileStore, *state.MemoryStore:
		default:
			t.Errorf("%s: %T", url, s)
		}
		s.Close()
	}
	if _, err := stateurl.Open(ctx, "ftp://x", stateurl.Options{}); err == nil {
		t.Fatal("ftp:// accepted")
	}
}

func TestOpenEtcd(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.StartCluster(t, 1)
	s, err := stateurl.Open(ctx, "etcd://"+c.HostPorts()+"/url-test", stateurl.Options{Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.(*etcd.Store); !ok {
		t.Fatalf("store is %T", s)
	}
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, l, state.Put(statetest.Res("a", 1))); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if r, err := cli.Get(ctx, "/url-test/apps/app/gen/0000000000000000/res/a"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("resource key: %v, %v", r, err)
	}

	// Unreachable: a clear error, quickly.
	start := time.Now()
	_, err = stateurl.Open(ctx, "etcd://127.0.0.1:1/p", stateurl.Options{EtcdDialTimeout: 500 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "etcd at 127.0.0.1:1") || time.Since(start) > 5*time.Second {
		t.Fatalf("unreachable etcd: %v after %s", err, time.Since(start))
	}
}

// With authentication on: the right password works; a wrong one is refused
// and never shown.
func TestOpenEtcdAuth(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []func() error{
		func() error { _, err := cli.UserAdd(ctx, "root", "root-Secret-1"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()
	url := "etcd://root@" + c.HostPorts() + "/auth"
	env := map[string]string{stateurl.EnvPassword: "wrong-Secret-2"}
	opts := stateurl.Options{Getenv: func(k string) string { return env[k] }}
	_, err = stateurl.Open(ctx, url, opts)
	if err == nil || strings.Contains(err.Error(), "wrong-Secret-2") {
		t.Fatalf("wrong password: %v", err)
	}
	t.Logf("wrong password: %v", err)
	env[stateurl.EnvPassword] = "root-Secret-1"
	s, err := stateurl.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, l, state.Put(statetest.Res("a", 1))); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Load(ctx, "app"); err != nil || d.Serial != 1 {
		t.Fatalf("load: %v, %v", d, err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock(ctx, "", state.NewLockInfo("deploy", "test")); err == nil || errors.Is(err, state.ErrLocked) {
		t.Fatalf("empty app: %v", err)
	}
}

// TLS with a client certificate, configured through the environment: works;
// without the client certificate, or without the CA, it is refused.
func TestOpenEtcdTLS(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.StartTLS(t)
	url := "etcd://" + c.HostPorts() + "/tls"
	env := map[string]string{
		stateurl.EnvCACert: c.TLS.CA, stateurl.EnvCert: c.TLS.ClientCert, stateurl.EnvKey: c.TLS.ClientKey,
	}
	opts := stateurl.Options{Getenv: func(k string) string { return env[k] }, EtcdDialTimeout: 2 * time.Second}
	s, err := stateurl.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.Lock(ctx, "app", state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, l, state.Put(statetest.Res("a", 1))); err != nil {
		t.Fatal(err)
	}
	if d, err := s.Load(ctx, "app"); err != nil || d.Serial != 1 {
		t.Fatalf("load over TLS: %v, %v", d, err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	// etcds:// with only the CA (no client certificate): refused by the server.
	noCert := stateurl.Options{EtcdCACert: c.TLS.CA, Getenv: func(string) string { return "" }, EtcdDialTimeout: 2 * time.Second}
	if _, err := stateurl.Open(ctx, "etcds://"+c.HostPorts()+"/tls", noCert); err == nil {
		t.Fatal("TLS without a client certificate accepted")
	}
	// Plain etcd:// against a TLS server: refused.
	if _, err := stateurl.Open(ctx, url, stateurl.Options{Getenv: func(string) string { return "" }, EtcdDialTimeout: 2 * time.Second}); err == nil {
		t.Fatal("plain connection to a TLS server accepted")
	}
	// A missing certificate file is named.
	env[stateurl.EnvCert] = "/nonexistent/cert.pem"
	if _, err := stateurl.Open(ctx, url, opts); err == nil || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
		t.Fatalf("missing certificate: %v", err)
	}
}
