package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/testimage"
)

const taggedApp = `
payloads:
  db:
    runtime: vm
    params:
      image_tag: "TAG"
networks:
  default:
    ip: "10.78.0.0/24"
services:
  db:
    payload: db
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "echo from-the-tagged-image"]
`

// TestDeployByImageTag: a service names its image by image_tag; gcompose
// resolves it through the image registry API (GOLEM_REGISTRY_URL, here the
// devnet's), a tag the registry does not know fails the plan, and the
// deploy before anything is made, the resolved image is kept in the state so that a
// re-plan of the unchanged app changes nothing, and a tag the registry now
// points at another image plans a rebuild.
func TestDeployByImageTag(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// A tag of this run's own: the devnet's registry answers for the newest
	// local image labelled with it (devnet registry.go).
	var b [6]byte
	_, _ = rand.Read(b[:])
	tag := "gcompose-test/registry-e2e:" + hex.EncodeToString(b[:])
	demo := demoImages(t, ctx)
	tagged := testimage.DerivedImage(t, ctx, "FROM "+demo["devnet-db"]+"\nLABEL golem.image.tag=\""+tag+"\"\n", "gcompose-test/registry-e2e:tagged")
	var moved string
	t.Cleanup(func() {
		for _, ref := range []string{moved, tagged} {
			if ref != "" {
				_, _ = e.docker.ImageRemove(context.Background(), ref, image.RemoveOptions{})
			}
		}
	})
	write := func(name, tag string) string {
		t.Helper()
		p := filepath.Join(e.dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(taggedApp, "TAG", tag, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Log("an unknown tag fails the plan, naming the tag and the registry")
	unknown := "gcompose-test/registry-e2e:no-such-tag"
	bad := write("unknown.yaml", unknown)
	for _, cmd := range []string{"plan", "deploy"} {
		args := []string{cmd, "-f", bad}
		if cmd == "deploy" {
			args = append(args, "--yes")
		}
		out, err := e.gcompose(ctx, args...)
		if err == nil {
			t.Fatalf("%s of an unknown tag succeeded:\n%s", cmd, out)
		}
		for _, want := range []string{"services.db", unknown, "image registry " + e.url, "404"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s of an unknown tag: the output does not name %q:\n%s", cmd, want, out)
			}
		}
		// The service adapter refuses the create (gcompose.refuse): plan
		// fails and deploy makes nothing, not even the payments and the VPN
		// the service would need first.
		if s := e.summary(ctx); s.Demands != 0 || s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 {
			t.Fatalf("%s of an unknown tag made something: %+v", cmd, s)
		}
		if !strings.Contains(out, "refused by its adapter") {
			t.Errorf("%s of an unknown tag: not a refusal:\n%s", cmd, out)
		}
	}

	t.Log("deploy by tag")
	desc := write("app.yaml", tag)
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 1 || s.Activities != 1 {
		t.Fatalf("after deploy: %+v", s)
	}
	if logs := e.must(ctx, "logs", "--file", desc, "db"); !strings.Contains(logs, "from-the-tagged-image") {
		t.Fatalf("the init command did not run:\n%s", logs)
	}
	// The state keeps the image as the registry resolved it; the agreement's
	// demand carried it.
	if got := e.field(ctx, "services.db", "hash"); got != dbHash {
		t.Errorf("state's image hash %s, want %s", got, dbHash)
	}
	url := e.url + "/download/" + dbHash
	if got := e.field(ctx, "services.db", "url"); got != url {
		t.Errorf("state's image url %s, want %s", got, url)
	}
	a, err := e.yc.GetAgreement(ctx, e.field(ctx, "services.db", "agreement_id"))
	if err != nil {
		t.Fatal(err)
	}
	if tp := a.Demand.Properties["golem.srv.comp.task_package"]; tp != "hash:sha3:"+dbHash+":"+url {
		t.Errorf("the demand's task package is %v, want hash:sha3:%s:%s", tp, dbHash, url)
	}

	t.Log("a re-plan of the unchanged app changes nothing")
	for r, op := range e.planOps(ctx, desc) {
		if op != "noop" {
			t.Errorf("re-plan: %s for %s", op, r)
		}
	}

	t.Log("the tag now names another image: a planned rebuild")
	other := strings.Repeat("c", 56)
	moved = testimage.DerivedImage(t, ctx, "FROM "+demo["devnet-db"]+"\nLABEL golem.image.tag=\""+tag+"\" golem.image.hash=\""+other+"\"\n", "gcompose-test/registry-e2e:moved")
	out := e.must(ctx, "plan", "-f", desc)
	if !strings.Contains(out, "image tag "+tag+" now resolves to image "+other) {
		t.Errorf("plan after the tag moved does not say so:\n%s", out)
	}
	if ops := e.planOps(ctx, desc); ops["services.db"] != "rebuild" {
		t.Errorf("plan after the tag moved: %v, want services.db rebuilt", ops)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if got := e.field(ctx, "services.db", "hash"); got != other {
		t.Errorf("after the rebuild the state's image hash is %s, want %s", got, other)
	}

	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Allocations != 0 || s.Networks != 0 || s.Agreements != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
