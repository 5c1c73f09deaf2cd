package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
)

// The plan tells the truth about a rebuild at a planned address (issue 12),
// as the tutorial runs it: the service adapter plans the VPN address of a
// service it rebuilds, so what reads it is planned with it, and the plan
// and the deploy agree on what changes.
//   - a change of web's init: the plan rebuilds web only (its proxy reads
//     web's unchanged address), and the deploy changes 1;
//   - the db's activity killed through the devnet's admin API: the plan
//     rebuilds the db only (web reads its unchanged address), and the
//     deploy changes 1; web keeps its agreement, the proxy its container.
func TestPlanAgreesWithDeployOnARebuildAtAPlannedAddress(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := moduleRoot(t)
	files := []string{}
	for _, name := range []string{"webapp.yaml", "hello.yaml"} {
		src, err := os.ReadFile(filepath.Join(root, "examples", "webapp", name))
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(e.dir, name)
		if err := os.WriteFile(f, src, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, "-f", f)
	}
	webapp, hello := files[:2], files
	e.must(ctx, append([]string{"deploy", "--yes"}, webapp...)...)

	// agrees runs plan and deploy with args: the plan rebuilds want only,
	// the deploy changes that one resource, and neither the address of want
	// nor anything else rented moves.
	agrees := func(what, want string, args []string) {
		t.Helper()
		agreements := map[string]string{db: e.field(ctx, db, "agreement_id"), web: e.field(ctx, web, "agreement_id")}
		ip, container := e.field(ctx, want, "ip"), e.field(ctx, proxy, "container")
		out := e.must(ctx, append([]string{"plan"}, args...)...)
		if !strings.Contains(out, "Plan: 0 to create, 0 to update, 1 to rebuild, 0 to delete, 4 unchanged.") ||
			!strings.Contains(out, "= /network_node/ip = \""+ip+"\" (output known before apply)") {
			t.Fatalf("%s: the plan does not rebuild %s alone at its planned address %s:\n%s", what, want, ip, out)
		}
		ops := e.planOpsOf(ctx, args...)
		for r, op := range ops {
			if (r == want) != (op == "rebuild") || (r != want && op != "noop") {
				t.Fatalf("%s: plan --json has %s for %s (all: %v); want a rebuild of %s only", what, op, r, ops, want)
			}
		}
		out = e.must(ctx, append([]string{"deploy", "--yes"}, args...)...)
		if !strings.Contains(out, "Deploy complete: 1 resource(s) changed") {
			t.Fatalf("%s: the deploy does not change 1 resource as planned:\n%s", what, out)
		}
		t.Logf("%s: plan and deploy agree: %s rebuilt, nothing else", what, want)
		for r, a := range agreements {
			now := e.field(ctx, r, "agreement_id")
			if r == want && now == a {
				t.Fatalf("%s: %s was not rebuilt (agreement %s)", what, r, a)
			}
			if r != want && now != a {
				t.Fatalf("%s: %s was rebuilt too (agreement %s, now %s)", what, r, a, now)
			}
		}
		if e.field(ctx, want, "ip") != ip {
			t.Fatalf("%s: %s moved from its planned address %s to %s", what, want, ip, e.field(ctx, want, "ip"))
		}
		if e.field(ctx, proxy, "container") != container {
			t.Fatalf("%s: the proxy's container was replaced", what)
		}
	}

	agrees("web's init changed", web, hello)
	e.kill(ctx, e.field(ctx, db, "activity_id"))
	agrees("the db's activity killed", db, hello)
	if page, err := get(ctx, e.field(ctx, proxy, "url")); err != nil || !strings.Contains(page, "records read back from the database") {
		t.Fatalf("after the rebuilds the app does not answer through its unchanged proxy: %v\n%s", err, page)
	}
	e.must(ctx, append([]string{"destroy", "--yes"}, webapp...)...)
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// A first deploy refuses over what can collide with it: the same app on the
// same yagna with no state here (its keeper and proxy, its agreements). The
// same app name deployed through another yagna on this machine (another
// devnet here) is no second copy of it: the first deploy there goes ahead.
func TestFirstDeployPerYagna(t *testing.T) {
	parallel(t)
	a := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "webapp", "webapp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	desc := filepath.Join(a.dir, "webapp.yaml")
	if err := os.WriteFile(desc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	a.must(ctx, "deploy", "-f", desc, "--yes")
	// The long-lived containers say which yagna they work for.
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+a.app), filters.Arg("label", longlived.LabelLongLived+"=true"))
	cs, err := a.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil || len(cs) != 2 {
		t.Fatalf("%d long-lived containers (%v), want the keeper and the proxy", len(cs), err)
	}
	for _, c := range cs {
		if got := c.Labels[longlived.LabelNode]; got != a.srv.Identity() {
			t.Fatalf("container %s is labelled %s=%q, want the devnet's requestor %s", c.Names, longlived.LabelNode, got, a.srv.Identity())
		}
	}
	before := a.summary(ctx)

	t.Log("the same yagna, the same app, no state here: refused")
	same := *a
	same.state = filepath.Join(t.TempDir(), "state")
	out, err := same.gcompose(ctx, "deploy", "-f", desc, "--yes")
	if err == nil || !strings.Contains(out, "objects of it already exist") || !strings.Contains(out, "keeper container") ||
		!strings.Contains(out, "proxy container") || !strings.Contains(out, "agreement") {
		t.Fatalf("a first deploy beside the same app on the same yagna: %v\n%s", err, out)
	}
	if after := a.summary(ctx); after.Agreements != before.Agreements || after.Allocations != before.Allocations || after.Networks != before.Networks {
		t.Fatalf("the refused deploy rented something: %+v, was %+v", after, before)
	}
	if out := same.must(ctx, "plan", "-f", desc); !strings.Contains(out, "deploy would refuse") {
		t.Fatalf("plan does not warn:\n%s", out)
	}

	// The devnet's instance (and so its requestor identity) comes from the
	// test's name: the subtest's must differ from the test's within the 40
	// characters startDevnet keeps.
	t.Run("other-yagna", func(t *testing.T) {
		b := startDevnet(t, devnet.Config{})
		if b.srv.Identity() == a.srv.Identity() {
			t.Fatalf("both devnets are requestor %s", a.srv.Identity())
		}
		// The same app name, through the other devnet, from another
		// checkout (state, directory). b's own cleanup removes b.app's
		// leftovers, which are none of a's.
		other := *b
		other.app, other.bin, other.images = a.app, a.bin, a.images
		odesc := filepath.Join(other.dir, "webapp.yaml")
		if err := os.WriteFile(odesc, src, 0o644); err != nil {
			t.Fatal(err)
		}
		out := other.must(ctx, "deploy", "-f", odesc, "--yes")
		if strings.Contains(out, "already exist") || strings.Contains(out, "would refuse") {
			t.Fatalf("the first deploy through another yagna speaks of a's objects:\n%s", out)
		}
		if s := other.summary(ctx); s.Agreements != 2 {
			t.Fatalf("the deploy through the other devnet: %+v", s)
		}
		// Each state sees its own: a's plan is unchanged by b's app.
		for r, op := range a.planOps(ctx, desc) {
			if op != "noop" {
				t.Errorf("a's plan after b's deploy: %s for %s", op, r)
			}
		}
		other.must(ctx, "destroy", "-f", odesc, "--yes")
		if s := other.summary(ctx); s.Agreements != 0 || s.Allocations != 0 || s.Networks != 0 {
			t.Fatalf("after destroy through the other devnet: %+v", s)
		}
	})
	if got := a.summary(ctx); got.Agreements != before.Agreements {
		t.Fatalf("a's agreements went from %d to %d while b deployed and destroyed", before.Agreements, got.Agreements)
	}
	a.must(ctx, "destroy", "-f", desc, "--yes")
	if s := a.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
