package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

// TestMarketWatcher: the first plan starts the market watcher (its
// payments check launches it, the state call adopts it) and waits one
// offer window, saying so; the next plan, a new gcompose run, reads the
// warm book at once. A provider that withdraws its offer (yagna says
// nothing) is gone from the plan once the watcher's refresh has passed, and
// a price change is in it; the deploy rents the new cheapest; the destroy
// of the app, the last the watcher watched for, stops it and leaves no
// demand.
func TestMarketWatcher(t *testing.T) {
	caps := []string{"vpn", "inet"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "steady", Capabilities: caps, Coeffs: []float64{0.00005, 0.00005, 0}},
		{Name: "repricer", Capabilities: caps, Coeffs: []float64{0.00004, 0.00004, 0}},
		{Name: "leaver", Capabilities: caps, Coeffs: []float64{0.00002, 0.00002, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}
	refresh := []string{"GCOMPOSE_OFFER_REFRESH=1s"}
	plan := func() (string, time.Duration) {
		t.Helper()
		began := time.Now()
		out, err := e.command(ctx, refresh, "plan", "--verbose", "-f", desc).CombinedOutput()
		if err != nil {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		return string(out), time.Since(began)
	}
	const cheapest = "within the caps in subnet public: "
	cold, coldTook := plan()
	if !strings.Contains(cold, "offer book cold: gathering offers for the 2s offer window") || !strings.Contains(cold, cheapest+"leaver (") {
		t.Fatalf("the first plan does not wait the cold book's window or price leaver:\n%s", cold)
	}
	// The payments check launches it while the servers start; the state
	// call adopts it instead of starting another.
	if !strings.Contains(cold, "market watcher launched") || strings.Contains(cold, "market watcher started") {
		t.Errorf("the first plan's market watcher was not launched by the payments check and adopted by its state call:\n%s", cold)
	}
	if n := e.watchers(ctx); n != 1 {
		t.Fatalf("%d market watcher container(s) after the first plan, want 1", n)
	}
	if s := e.summary(ctx); s.Watched == 0 || s.Demands != 0 {
		t.Errorf("after a plan: %d watched demand(s), %d of apps; want the watcher's only", s.Watched, s.Demands)
	}
	warm, warmTook := plan()
	if strings.Contains(warm, "offer book cold") || !strings.Contains(warm, cheapest+"leaver (") {
		t.Errorf("the second plan did not read the warm book:\n%s", warm)
	}
	t.Logf("plan: cold %s, warm %s", coldTook.Round(time.Millisecond), warmTook.Round(time.Millisecond))

	for name, body := range map[string]devnet.OfferChange{"leaver": {Withdrawn: true}, "repricer": {Coeffs: []float64{0.00001, 0.00001, 0}}} {
		e.admin(ctx, http.MethodPut, "/providers/"+name+"/offer", body)
	}
	// The refresh (1s) and the fresh demand's window (2s), and a margin.
	time.Sleep(4 * time.Second)
	after, _ := plan()
	if strings.Contains(after, "leaver") || !strings.Contains(after, cheapest+"repricer (") {
		t.Errorf("the plan after the withdrawal and the price change:\n%s", after)
	}
	out, err := e.command(ctx, refresh, "deploy", "--yes", "-f", desc).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	if got := e.field(ctx, "services.db", "provider_name"); got != "repricer" {
		t.Errorf("rented %q, want repricer (cheapest now)", got)
	}
	out, err = e.command(ctx, refresh, "destroy", "--yes", "-f", desc).CombinedOutput()
	if err != nil {
		t.Fatalf("destroy: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "market watcher stopped") {
		t.Errorf("the destroy does not say the watcher stopped:\n%s", out)
	}
	if s := e.summary(ctx); s.Watched != 0 || s.Demands != 0 {
		t.Errorf("after the destroy: %d watched demand(s), %d of apps; want none", s.Watched, s.Demands)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.watchers(ctx) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher's container is still there after the destroy")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWatcherNotStartedByRefresh: only plan and deploy, which estimate and
// rent, start the market watcher. With an app deployed and no watcher
// running, gcompose ps, cost and refresh (whose payments state call saw
// the allocation) leave none behind; the next plan starts it.
func TestWatcherNotStartedByRefresh(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "--yes", "-f", desc)
	if n := e.watchers(ctx); n != 1 {
		t.Fatalf("%d market watcher container(s) after the deploy, want 1", n)
	}
	e.stopWatchers(ctx)
	for _, args := range [][]string{{"ps"}, {"cost", "-f", desc}, {"refresh", "-f", desc}} {
		var out string
		if args[0] == "ps" {
			// ps takes no adapter images: it names the app and its state.
			cmd := e.command(ctx, nil, "state", "list")
			cmd.Args = []string{e.bin, "ps", "--app", e.app, "--state", e.state}
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("gcompose ps: %v\n%s", err, b)
			}
			out = string(b)
		} else {
			out = e.must(ctx, args...)
		}
		if n := e.watchers(ctx); n != 0 {
			t.Errorf("gcompose %s started the market watcher (%d container(s)):\n%s", args[0], n, out)
			e.stopWatchers(ctx)
		}
	}
	// The check above can fail: the plan does start it.
	e.must(ctx, "plan", "-f", desc)
	if n := e.watchers(ctx); n != 1 {
		t.Errorf("%d market watcher container(s) after the plan, want 1", n)
	}
	e.must(ctx, "destroy", "--yes", "-f", desc)
	deadline := time.Now().Add(20 * time.Second)
	for e.watchers(ctx) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the watcher's container is still there after the destroy")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s := e.summary(ctx); s.Watched != 0 || s.Demands != 0 {
		t.Errorf("after the destroy: %d watched demand(s), %d of apps; want none", s.Watched, s.Demands)
	}
}

// watchedDemands are the ids of the live demands the market watcher made
// (marked gcompose.offer-watcher), from the requestor's GET /demands.
func (e *env) watchedDemands(ctx context.Context) []string {
	e.t.Helper()
	ds, err := e.yc.Demands(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ds {
		if d.Properties["gcompose.offer-watcher"] == true {
			out = append(out, d.DemandID)
		}
	}
	return out
}

// TestKilledWatchersDemandsUnsubscribed: a market watcher killed with
// SIGKILL (it unsubscribes nothing) leaves its demands subscribed; the
// watcher the next plan starts unsubscribes them, so the devnet holds no
// orphaned demand of the dead one, only the new watcher's own.
func TestKilledWatchersDemandsUnsubscribed(t *testing.T) {
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "plan", "-f", desc)
	old := e.watchedDemands(ctx)
	if len(old) == 0 {
		t.Fatal("no watched demand after the first plan")
	}
	f := filters.NewArgs(filters.Arg("label", "gcompose.offer-watcher=true"), filters.Arg("label", "gcompose.yagna-url="+e.url))
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: f})
	if err != nil || len(cs) != 1 {
		t.Fatalf("%d watcher container(s), %v; want 1", len(cs), err)
	}
	if err := e.docker.ContainerKill(ctx, cs[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.watchers(ctx) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the killed watcher's container is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The orphans exist: a SIGKILL unsubscribes nothing.
	if left := e.watchedDemands(ctx); len(left) != len(old) {
		t.Fatalf("after the kill: watched demands %v, want the dead watcher's %v", left, old)
	}
	out := e.must(ctx, "plan", "-f", desc)
	now := e.watchedDemands(ctx)
	for _, id := range old {
		if slices.Contains(now, id) {
			t.Errorf("the dead watcher's demand %s is still subscribed after the next plan (live: %v)\n%s", id, now, out)
		}
	}
	if len(now) == 0 || e.watchers(ctx) != 1 {
		t.Errorf("after the next plan: %d watcher(s), watched demands %v; want the new watcher's", e.watchers(ctx), now)
	}
	e.stopWatchers(ctx)
	if s := e.summary(ctx); s.Watched != 0 || s.Demands != 0 {
		t.Errorf("after the watcher's stop: %d watched demand(s), %d of apps; want none", s.Watched, s.Demands)
	}
}

// TestGoneOfferLeavesTheBookAtOnce: the create counters the cheapest
// offer, which its provider withdrew after the create's demand got it;
// yagna answers 400 "Subscription [..] was already unsubscribed." (the
// devnet as yagna, adapters/golem/devnet/offers.go). The create rents the
// next provider and tells the market watcher, whose book drops the offer at
// once: the next plan, long before the watcher's refresh, no longer prices
// the provider that left.
func TestGoneOfferLeavesTheBookAtOnce(t *testing.T) {
	caps := []string{"vpn", "inet"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "steady", Count: 2, Capabilities: caps, Coeffs: []float64{0.00005, 0.00005, 0}},
		{Name: "leaver", Capabilities: caps, Coeffs: []float64{0.00002, 0.00002, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}
	// No refresh within the test: only the create's word drops the offer.
	env := []string{"GCOMPOSE_OFFER_REFRESH=10m"}
	const cheapest = "within the caps in subnet public: "
	plan := func(args ...string) string {
		t.Helper()
		out, err := e.command(ctx, env, append([]string{"plan", "--verbose"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := plan("-f", desc); !strings.Contains(out, cheapest+"leaver (") {
		t.Fatalf("the first plan does not price leaver:\n%s", out)
	}
	cmd := e.command(ctx, env, "deploy", "--yes", "--verbose", "-f", desc)
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stdout = syncwriter.Writer{Mu: &mu, W: &out}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Once the allocation exists, every yagna answer waits 1.5 s: the
	// create's demand is subscribed (its proposals, leaver's among them,
	// queued at once), and its first collect of them waits; leaver
	// withdraws meanwhile, and the create counters its offer.
	withdrawn, slowed := false, false
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		select {
		case err = <-exited:
			break wait
		case <-tick.C:
		}
		if withdrawn {
			continue
		}
		s := e.summary(ctx)
		switch {
		case !slowed && s.Allocations >= 1:
			e.faults(ctx, map[string]any{"slow": "1500ms"})
			slowed = true
		case slowed && s.Demands >= 1:
			e.admin(ctx, http.MethodPut, "/providers/leaver/offer", devnet.OfferChange{Withdrawn: true})
			e.faults(ctx, map[string]any{})
			withdrawn = true
		}
	}
	e.faults(ctx, map[string]any{})
	mu.Lock()
	text := out.String()
	mu.Unlock()
	if err != nil || !withdrawn {
		t.Fatalf("deploy: %v (leaver withdrawn during the create: %v)\n%s", err, withdrawn, text)
	}
	if !strings.Contains(text, "was already unsubscribed") {
		t.Errorf("the create did not counter leaver's withdrawn offer (no 400 in its output):\n%s", text)
	}
	if got := e.field(ctx, "services.db", "provider_name"); !strings.HasPrefix(got, "steady-") {
		t.Errorf("rented %q, want steady (leaver withdrew)", got)
	}
	// A second service of the same payload: its estimate reads the book.
	two := filepath.Join(e.dir, "two.yaml")
	if err := os.WriteFile(two, []byte(marketApp("")+"  db2:\n    payload: db\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := plan("-f", two); strings.Contains(after, "leaver") {
		t.Errorf("the plan after the create's 400 still prices leaver (the book kept its withdrawn offer):\n%s", after)
	}
	e.must(ctx, "destroy", "--yes", "-f", desc)
}
