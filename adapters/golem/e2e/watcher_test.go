package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// TestMarketWatcher: the first plan starts the market watcher and waits
// one offer window, saying so; the next plan, a new gcompose run, reads the
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
