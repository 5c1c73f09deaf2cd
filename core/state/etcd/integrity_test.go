package etcd_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/etcd"
	"github.com/gcompose/gcompose/core/state/etcd/etcdtest"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// seeded is an application with three resources in its own prefix.
func seeded(t *testing.T, c *etcdtest.Cluster, prefix string) (*etcd.Store, *state.Document) {
	t.Helper()
	s := open(t, c, prefix)
	l := statetest.MustLock(t, s, "shop")
	statetest.MustApply(t, s, l, state.Put(statetest.Res("db", 1)), state.Put(statetest.Res("web", 2)))
	statetest.MustApply(t, s, l, state.Put(statetest.Res("cache", 3)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return s, statetest.MustLoad(t, s, "shop")
}

func loadFails(t *testing.T, s state.Store, target error, wants ...string) string {
	t.Helper()
	_, err := s.Load(context.Background(), "shop")
	if !errors.Is(err, target) {
		t.Fatalf("Load: %v, want %v", err, target)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Load error lacks %q:\n%v", w, err)
		}
	}
	return err.Error()
}

// The head deleted, the resource keys still there: Load refuses to start
// from nothing, Recover rebuilds the same document (lineage and serial from
// the generation's copy of the head), and a forced Replace writes it back.
func TestHeadDeleted(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s, want := seeded(t, c, "/headless")
	if _, err := s.Client().Delete(ctx, "/headless/apps/shop/head"); err != nil {
		t.Fatal(err)
	}
	msg := loadFails(t, s, state.ErrMissingDocument, "/headless/apps/shop/gen/0000000000000000/: 3 resource keys (serial 2, lineage "+want.Lineage+")", "gcompose state recover --app shop")
	t.Logf("head deleted: %s", msg)
	if apps, err := s.Apps(ctx); err != nil || strings.Join(apps, ",") != "shop" {
		t.Fatalf("Apps without a head: %v, %v", apps, err)
	}
	// A push without force does not write over it.
	l := statetest.MustLock(t, s, "shop")
	if err := s.Replace(ctx, l, state.NewDocument("shop"), false); !errors.Is(err, state.ErrMissingDocument) {
		t.Fatalf("unforced Replace over resource keys without a head: %v", err)
	}
	rec, err := s.Recover(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recover: %s", rec)
	if rec.Doc.Lineage != want.Lineage || rec.Doc.Serial != want.Serial || strings.Join(rec.Doc.Names(), ",") != "cache,db,web" || len(rec.Lost) != 0 {
		t.Fatalf("recovered %s %d %v lost %v", rec.Doc.Lineage, rec.Doc.Serial, rec.Doc.Names(), rec.Lost)
	}
	if err := s.Replace(ctx, l, rec.Doc, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	if d := statetest.MustLoad(t, s, "shop"); d.Lineage != want.Lineage || d.Serial != want.Serial || len(d.Resources) != 3 {
		t.Fatalf("after recovery: %s %d %v", d.Lineage, d.Serial, d.Names())
	}
}

// A head whose generation holds nothing (edited by hand to point elsewhere)
// is a lost document too; so is a copy of the head that differs from it.
func TestGenerationPointsAtNothing(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s, want := seeded(t, c, "/nowhere")
	resp, err := s.Client().Get(ctx, "/nowhere/apps/shop/head")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	orig := resp.Kvs[0].Value
	var hd map[string]any
	json.Unmarshal(orig, &hd)
	hd["generation"] = 7
	b, _ := json.Marshal(hd)
	s.Client().Put(ctx, "/nowhere/apps/shop/head", string(b))
	msg := loadFails(t, s, state.ErrMissingDocument, "points at generation 7, which holds nothing", "gen/0000000000000000/: 3 resource keys")
	t.Logf("generation pointing at nothing: %s", msg)
	rec, err := s.Recover(ctx, "shop")
	if err != nil || rec.Doc.Serial != want.Serial || len(rec.Doc.Resources) != 3 {
		t.Fatalf("recover: %v %v", rec, err)
	}

	// The copy in the generation differs from the head.
	hd["generation"] = 0
	hd["serial"] = 9
	b, _ = json.Marshal(hd)
	s.Client().Put(ctx, "/nowhere/apps/shop/head", string(b))
	loadFails(t, s, state.ErrCorrupt, "differ: one was changed by hand")
	s.Client().Put(ctx, "/nowhere/apps/shop/head", string(orig))
	statetest.MustLoad(t, s, "shop")
}

// An unknown key in a resource value or the head is refused, naming the key.
func TestUnknownKeyRefused(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s, _ := seeded(t, c, "/typo")
	key := "/typo/apps/shop/gen/0000000000000000/res/db"
	resp, err := s.Client().Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	s.Client().Put(ctx, key, strings.Replace(string(resp.Kvs[0].Value), `"status"`, `"stXtus"`, 1))
	msg := loadFails(t, s, state.ErrCorrupt, key, `"stXtus"`)
	t.Logf("resource with stXtus: %s", msg)
	s.Client().Put(ctx, key, string(resp.Kvs[0].Value))
	statetest.MustLoad(t, s, "shop")
}

// A head written by an older gcompose (no copy in its generation) whose
// generation is empty is an application with no resources, not damage.
func TestOldEmptyHeadStillLoads(t *testing.T) {
	ctx := context.Background()
	c := etcdtest.Start(t)
	s := open(t, c, "/old")
	head := `{"format_version":1,"lineage":"old","serial":4,"app":"shop","updated_at":"2026-11-22T03:00:00Z","generation":0,"write_id":"w"}`
	if _, err := s.Client().Put(ctx, "/old/apps/shop/head", head); err != nil {
		t.Fatal(err)
	}
	if d := statetest.MustLoad(t, s, "shop"); d.Serial != 4 || len(d.Resources) != 0 {
		t.Fatalf("old empty head: %d %v", d.Serial, d.Names())
	}
	_, err := s.Client().Delete(ctx, "/old/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
}
