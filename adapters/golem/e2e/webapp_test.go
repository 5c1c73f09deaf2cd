package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

const (
	db    = "services.db-service"
	web   = "services.web-service"
	proxy = "resources.golem-proxy-web-service"
	pay   = "resources.golem-payments"
	vpn   = "networks.default"
)

// TestWebapp is the life of examples/webapp on the devnet: deploy and use it
// through the local proxy, a no-op re-deploy, debit notes answered past the
// provider's timeout, a changed init rebuilding web only, a db killed behind
// gcompose's back rebuilt with web by knock-on, and a destroy that leaves
// nothing.
func TestWebapp(t *testing.T) {
	// Debit notes every second, agreements terminated after 5 s (the least a
	// provider takes) without an answer: only the long-lived keeper can keep
	// the app alive.
	e := start(t, devnet.Config{DebitNoteInterval: devnet.Duration{Duration: time.Second}, DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "webapp", "webapp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	desc := filepath.Join(e.dir, "webapp.yaml")
	if err := os.WriteFile(desc, src, 0o644); err != nil {
		t.Fatal(err)
	}

	page := func(what string) string {
		t.Helper()
		url := e.field(ctx, proxy, "url")
		body, err := getWithin(ctx, url, 20)
		if err != nil || !strings.Contains(body, "records read back from the database") || !strings.Contains(body, "greeting") {
			t.Fatalf("%s: page at %s: %v\n%s", what, url, err, body)
		}
		return body
	}

	t.Log("deploy")
	e.must(ctx, "deploy", "-f", desc, "--yes")
	page("after deploy")
	list := e.must(ctx, "state", "list", "-f", desc)
	for _, r := range []string{vpn, pay, db, web, proxy} {
		if !strings.Contains(list, r) {
			t.Fatalf("state list lacks %s:\n%s", r, list)
		}
	}
	if s := e.summary(ctx); s.Agreements != 2 || s.Activities != 2 || s.Allocations != 1 || s.Networks != 1 {
		t.Fatalf("after deploy: %+v", s)
	}
	e.noKeyLeak(ctx)
	// What web's init commands printed is kept in the state and shown by logs.
	if logs := e.must(ctx, "logs", "--file", desc, "web-service"); !strings.Contains(logs, "initdb: greeting stored at") || !strings.Contains(logs, "init[0]") {
		t.Fatalf("gcompose logs web-service does not show init[0]'s output:\n%s", logs)
	}

	t.Log("re-deploy is a no-op")
	for r, op := range e.planOps(ctx, desc) {
		if op != "noop" {
			t.Errorf("re-deploy plans %s for %s", op, r)
		}
	}
	if out := e.must(ctx, "deploy", "-f", desc, "--yes"); !strings.Contains(out, "up to date") {
		t.Fatalf("re-deploy:\n%s", out)
	}

	t.Log("debit notes are answered for longer than the provider's timeout")
	dbAgreement := e.field(ctx, db, "agreement_id")
	time.Sleep(8 * time.Second)
	if s := e.summary(ctx); s.Agreements != 2 {
		t.Fatalf("agreements terminated while the keeper runs: %+v", s)
	}
	if a, err := e.yc.GetAgreement(ctx, dbAgreement); err != nil || a.State != "Approved" {
		t.Fatalf("db agreement: %v %v", a.State, err)
	}
	page("after 8 s of debit notes")

	t.Log("changing web's init rebuilds web only")
	changed := strings.Replace(string(src), `"initdb"]`, `"initdb"]
      - run:
          args: ["/bin/sh", "-c", "echo changed > /tmp/changed"]`, 1)
	if changed == string(src) {
		t.Fatal("could not change the init of web-service")
	}
	if err := os.WriteFile(desc, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	ops := e.planOps(ctx, desc)
	if ops[web] != "rebuild" || ops[db] != "noop" || ops[vpn] != "noop" || ops[pay] != "noop" {
		t.Fatalf("plan after an init change: %v", ops)
	}
	webAgreement := e.field(ctx, web, "agreement_id")
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if e.field(ctx, web, "agreement_id") == webAgreement {
		t.Fatal("web was not rebuilt")
	}
	if e.field(ctx, db, "agreement_id") != dbAgreement {
		t.Fatal("db was rebuilt by a change of web's init")
	}
	page("after the init change")

	t.Log("a db killed behind gcompose's back is rebuilt at its planned address; web is not")
	webAgreement = e.field(ctx, web, "agreement_id")
	oldIP, oldProvider := e.field(ctx, db, "ip"), e.field(ctx, db, "provider_id")
	e.kill(ctx, e.field(ctx, db, "activity_id"))
	// refresh reports the drift of exactly the dead resource and changes nothing.
	refreshed := e.must(ctx, "refresh", "-f", desc)
	var drifted []string
	for _, l := range strings.Split(refreshed, "\n") {
		if strings.Contains(l, "drift:") {
			drifted = append(drifted, l)
		}
	}
	if len(drifted) != 1 || !strings.Contains(drifted[0], db) {
		t.Fatalf("refresh after the db died reports drift on %q, want exactly %s:\n%s", drifted, db, refreshed)
	}
	if e.field(ctx, db, "agreement_id") != dbAgreement {
		t.Fatal("refresh changed the state")
	}
	ops = e.planOps(ctx, desc)
	if ops[db] != "rebuild" || ops[vpn] != "noop" {
		t.Fatalf("plan after the db died: %v", ops)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if e.field(ctx, db, "agreement_id") == dbAgreement {
		t.Fatal("db was not rebuilt")
	}
	// Its address is planned (adapters/golem/lowering): the same after the rebuild, so
	// web, which only reads it, keeps running and reaches the new node.
	if e.field(ctx, db, "ip") != oldIP {
		t.Fatalf("the rebuilt db moved from its planned address %s to %s", oldIP, e.field(ctx, db, "ip"))
	}
	if e.field(ctx, web, "agreement_id") != webAgreement {
		t.Fatal("web was rebuilt although nothing it reads changed")
	}
	if e.field(ctx, db, "provider_id") == oldProvider {
		t.Fatalf("the rebuilt db went back to provider %s, which failed it", oldProvider)
	}
	if !strings.Contains(e.must(ctx, "state", "show", db), oldProvider) {
		t.Fatalf("the failed provider %s is not remembered in db's identity", oldProvider)
	}
	// The new db starts empty (web's initdb greeting was in the old one), and
	// web reads what it writes back from it across the VPN.
	reached := func(what string) {
		t.Helper()
		url := e.field(ctx, proxy, "url")
		var body string
		var err error
		for i := 0; i < 40; i++ {
			if body, err = get(ctx, url); err == nil && strings.Contains(body, "records read back from the database") {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("%s: page at %s: %v\n%s", what, url, err, body)
	}
	reached("after the db rebuild")
	for r, op := range e.planOps(ctx, desc) {
		if op != "noop" {
			t.Errorf("after the recovery, plan still has %s for %s", op, r)
		}
	}

	t.Log("a db whose provider goes offline is drift, rebuilt by the next deploy")
	dbAgreement, oldProvider = e.field(ctx, db, "agreement_id"), e.field(ctx, db, "provider_id")
	e.offline(ctx, oldProvider, 500)
	refreshed = e.must(ctx, "refresh", "-f", desc)
	if !strings.Contains(refreshed, "unreachable") {
		t.Fatalf("refresh with db's provider offline does not say it is unreachable:\n%s", refreshed)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if e.field(ctx, db, "agreement_id") == dbAgreement || e.field(ctx, db, "provider_id") == oldProvider {
		t.Fatal("db was not rebuilt away from its offline provider")
	}
	reached("after the rebuild away from the offline provider")
	e.offline(ctx, oldProvider, 0)

	t.Log("without the keeper, unanswered debit notes end the agreements, and the next deploy sees it")
	keeper := e.field(ctx, pay, "keeper")
	if err := e.docker.ContainerKill(ctx, keeper, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.summary(ctx).Agreements != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("agreements still approved 30 s after the keeper died: %+v", e.summary(ctx))
		}
		time.Sleep(500 * time.Millisecond)
	}
	ops = e.planOps(ctx, desc)
	// The keeper is restarted; the services depend on the payments
	// resource, so they are knock-ons that apply asks again: their
	// agreements are gone, so they are rebuilt.
	if ops[pay] != "update" || ops[db] == "noop" || ops[web] == "noop" || ops[vpn] != "noop" {
		t.Fatalf("plan after the keeper died: %v", ops)
	}
	dbAgreement = e.field(ctx, db, "agreement_id")
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if e.field(ctx, db, "agreement_id") == dbAgreement {
		t.Fatal("db was not rebuilt after its agreement ended")
	}
	page("after the keeper and the services came back")

	t.Log("destroy leaves no container, network, agreement or allocation")
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 || s.Demands != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
	deadline = time.Now().Add(20 * time.Second)
	for e.appContainers(ctx) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after destroy: %d containers of the app left", e.appContainers(ctx))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := e.must(ctx, "state", "list", "-f", desc); strings.Contains(out, "services.") {
		t.Fatalf("state after destroy:\n%s", out)
	}
}

var imageHashIn = regexp.MustCompile(`image_hash:\s*"?(?:sha3:)?([0-9a-f]{56})`)

// TestConformancePlans plans every conformance descriptor against the devnet:
// the repo's copy (core/descriptor/testdata/conformance), or the folder
// GCOMPOSE_CONFORMANCE names. Finding none is a failure: a glob that matches
// nothing must not turn the test into a pass.
func TestConformancePlans(t *testing.T) {
	parallel(t)
	dir := filepath.Join("..", "..", "..", "core", "descriptor", "testdata", "conformance")
	if d := os.Getenv("GCOMPOSE_CONFORMANCE"); d != "" {
		dir = d
	}
	// gcompose runs in a directory of its own: give it absolute paths.
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance descriptors in %s/*/*.yaml (%v)", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The plan resolves each image hash through the image registry (the
	// devnet's): the descriptors' real-network hashes stand for the demo db
	// image there.
	db := demoImages(t, ctx)["devnet-db"]
	images := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range imageHashIn.FindAllStringSubmatch(string(b), -1) {
			images[m[1]] = db
		}
	}
	// The plan refuses what the market cannot rent (the joint estimate of
	// a VPN's services, docs/golem.md): gap16/webapp.gaom.yaml runs its db
	// and two web instances that demand 2-core providers on one VPN, and the
	// db's cheapest offer is a 2-core one too, so three small providers.
	e := start(t, devnet.Config{Images: images, Providers: []devnet.ProviderConfig{
		{Name: "small", Count: 3, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.00005, 0.0001, 0}},
		{Name: "large", Count: 3, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.0001, 0.0002, 0}},
	}})
	// The plans run four at a time, each as an app of its own with a state of
	// its own (a plan takes its app's state lock): each waits out an offer
	// window, one after the other they took two minutes.
	type result struct {
		out string
		err error
	}
	results := make([]result, len(files))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, f := range files {
		own := *e
		own.app = fmt.Sprintf("%s-%d", e.app, i)
		own.state = filepath.Join(t.TempDir(), "state")
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := own.gcompose(ctx, "plan", "-f", f)
			results[i] = result{out, err}
		}()
	}
	wg.Wait()
	for i, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			out, err := results[i].out, results[i].err
			if err != nil {
				t.Fatalf("gcompose plan %s: %v\n%s", f, err, out)
			}
			if !strings.Contains(out, "Plan:") {
				t.Fatalf("no plan:\n%s", out)
			}
		})
	}
}
