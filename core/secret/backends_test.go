package secret

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// The wrapper is a faithful state.Store: the backends' conformance suite
// passes through it (with a key and a redactor, and no secrets in play).
func TestStoreConformance(t *testing.T) {
	codec := keyCodec(t)
	statetest.Run(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
		mem := state.NewMemoryStore()
		wrap := func(t *testing.T) state.Store { return &Store{Store: mem, Codec: codec, Redactor: NewRedactor()} }
		return wrap(t), wrap
	})
}

// On etcd, a dump of every key shows envelopes only.
func TestStoreOnEtcd(t *testing.T) {
	c := etcdtest.Start(t)
	ctx := context.Background()
	prefix := "/secrets-" + state.NewID()
	es, err := etcd.New(ctx, etcd.Config{Endpoints: c.Endpoints(), Prefix: prefix, LockTTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	red := NewRedactor()
	red.Add("etcd-s3cret")
	codec := keyCodec(t)
	st := &Store{Store: es, Codec: codec, Redactor: red}
	lock, err := st.Lock(ctx, "app", state.NewLockInfo("test", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	r := &state.Resource{Name: "db", Type: "img", Status: state.StatusActive,
		Config: map[string]any{"password": "etcd-s3cret"}, State: map[string]any{"dsn": "pg://u:etcd-s3cret@h"}}
	if err := st.Apply(ctx, lock, state.Put(r)); err != nil {
		t.Fatal(err)
	}
	doc, err := st.Load(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Replace(ctx, lock, doc, true); err != nil {
		t.Fatal(err)
	}
	if err := st.Compact(ctx, lock); err != nil {
		t.Fatal(err)
	}
	st.Unlock(ctx, lock)

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	envelopes := 0
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), "etcd-s3cret") {
			t.Errorf("etcd key %s shows the secret: %s", kv.Key, kv.Value)
		}
		envelopes += strings.Count(string(kv.Value), EnvelopeKey)
	}
	if len(resp.Kvs) == 0 || envelopes == 0 {
		t.Fatalf("dump of %d keys holds %d envelopes", len(resp.Kvs), envelopes)
	}
	got, err := (&Store{Store: es, Codec: codec, Redactor: NewRedactor()}).Load(ctx, "app")
	if err != nil || got.Resources["db"].State["dsn"] != "pg://u:etcd-s3cret@h" {
		t.Errorf("load from etcd: %v %v", err, got)
	}
}
