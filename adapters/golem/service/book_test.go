package service

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// fakeMarket is yagna's market API as the book uses it: demands subscribed
// and unsubscribed, and each subscription's events, queued by the test.
type fakeMarket struct {
	mu          sync.Mutex
	n           int
	subscribed  []yagna.DemandOfferBase
	live        map[string]bool
	sent        map[string]int // events already sent per subscription
	events      []yagna.MarketEvent
	unsubscribe []string
	// withdrawn providers' offers are sent to no subscription any more.
	withdrawn map[string]bool
}

func (f *fakeMarket) offer(provider string, price float64, props map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := map[string]any{
		"golem.runtime.name": "vm", "golem.node.debug.subnet": "public", "golem.runtime.capabilities": []any{"vpn"}, "golem.inf.cpu.threads": 4.0,
		"golem.inf.mem.gib": 8.0, "golem.inf.storage.gib": 64.0,
		"golem.com.usage.vector":  []any{"golem.usage.duration_sec", "golem.usage.cpu_sec"},
		"golem.com.pricing.model": "linear", "golem.com.pricing.model.linear.coeffs": []any{0.0001, price, 0},
	}
	for k, v := range props {
		p[k] = v
	}
	f.events = append(f.events, yagna.MarketEvent{EventType: yagna.EventProposal, Proposal: &yagna.Proposal{
		ProposalID: fmt.Sprintf("%s-%d", provider, len(f.events)), IssuerID: provider, State: yagna.ProposalInitial, Properties: p, Constraints: "()",
	}})
}

func (f *fakeMarket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rest := strings.TrimPrefix(r.URL.Path, yagna.MarketPrefix+"/demands")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/me":
		_ = json.NewEncoder(w).Encode(yagna.Identity{Identity: "0xrequestor"})
	case r.Method == http.MethodPost && rest == "":
		var d yagna.DemandOfferBase
		_ = json.NewDecoder(r.Body).Decode(&d)
		f.n++
		id := fmt.Sprintf("sub-%d", f.n)
		f.subscribed = append(f.subscribed, d)
		f.live[id] = true
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(id)
	case r.Method == http.MethodGet && rest == "":
		// The caller's live demands, as GET /demands lists them.
		out := []yagna.Demand{}
		for i, d := range f.subscribed {
			if id := fmt.Sprintf("sub-%d", i+1); f.live[id] {
				out = append(out, yagna.Demand{DemandID: id, Properties: d.Properties, Constraints: d.Constraints, RequestorID: "0xrequestor"})
			}
		}
		_ = json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodDelete:
		id := strings.TrimPrefix(rest, "/")
		f.unsubscribe = append(f.unsubscribe, id)
		delete(f.live, id)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && strings.HasSuffix(rest, "/events"):
		id := strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/events")
		if !f.live[id] {
			http.Error(w, `{"message":"subscription not found"}`, http.StatusNotFound)
			return
		}
		var evs []yagna.MarketEvent
		for _, ev := range f.events[f.sent[id]:] {
			if !f.withdrawn[ev.Proposal.IssuerID] {
				evs = append(evs, ev)
			}
		}
		f.sent[id] = len(f.events)
		if len(evs) == 0 {
			// A short long-poll: the test's window is short too.
			f.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			f.mu.Lock()
		}
		_ = json.NewEncoder(w).Encode(evs)
	default:
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
	}
}

func bookConfig(constraints ...string) Config {
	return Config{Name: "s", App: "app", Payload: Payload{Name: "p", Runtime: "vm", Capabilities: []string{"vpn"}, Constraints: constraints,
		Params: map[string]any{"image_hash": strings.Repeat("a", 56)}}}
}

func bookRead(t *testing.T, b *book, yc *yagna.Client, cfg Config, window time.Duration) ([]*yagna.Proposal, time.Duration) {
	t.Helper()
	return bookReadIn(t, b, yc, cfg, "public", window, false)
}

// bookReadIn reads cfg's offers in subnet; open only opens the page.
func bookReadIn(t *testing.T, b *book, yc *yagna.Client, cfg Config, subnet string, window time.Duration, open bool) ([]*yagna.Proposal, time.Duration) {
	t.Helper()
	cons, err := cfg.ConstraintsIn(subnet)
	if err != nil {
		t.Fatal(err)
	}
	// As rental.demand makes it for the estimate.
	d := yagna.DemandOfferBase{Constraints: cons, Properties: map[string]any{
		"golem.srv.comp.expiration": time.Now().Add(time.Hour).UnixMilli(), "golem.node.debug.subnet": subnet,
		"golem.srv.comp.task_package": "hash:sha3:" + cfg.Payload.Params["image_hash"].(string) + ":http://x",
		tag.App:                       cfg.App, tag.Resource: "services." + cfg.Name,
	}}
	bd, err := broadDemand(yc.BaseURL, cfg, subnet, d)
	if err != nil {
		t.Fatal(err)
	}
	if open {
		if _, err := b.page(t.Context(), yc, slog.New(slog.DiscardHandler), bd, window); err != nil {
			t.Fatal(err)
		}
		return nil, 0
	}
	got, waited, err := b.read(t.Context(), yc, slog.New(slog.DiscardHandler), bd, d, window, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got, waited
}

// TestBookOneWindowForEveryPayload: two payloads of different constraints
// (examples/webapp's database and web server) are estimated from one
// subscription; the second read does not wait another window, and each
// gets only the offers its own demand matches. A provider that offers
// again at another price is read at its latest price. close unsubscribes.
// Fails before this commit: the estimate subscribed per payload and waited
// a window each (BenchmarkGolemPlan: 11 s for the webapp's plan).
func TestBookOneWindowForEveryPayload(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	f.offer("0xbig", 0.0002, map[string]any{"golem.inf.storage.gib": 64.0, "golem.inf.mem.gib": 2.0})
	f.offer("0xmem", 0.0003, map[string]any{"golem.inf.storage.gib": 5.0, "golem.inf.mem.gib": 8.0})
	b := &book{}
	window := 300 * time.Millisecond
	db, waited := bookRead(t, b, yc, bookConfig("golem.inf.storage.gib>10"), window)
	if waited < window/2 {
		t.Errorf("the first read waited %s, want the window (%s)", waited, window)
	}
	if len(db) != 1 || db[0].IssuerID != "0xbig" {
		t.Errorf("database offers %v, want 0xbig only", db)
	}
	f.offer("0xbig", 0.0001, map[string]any{"golem.inf.storage.gib": 64.0, "golem.inf.mem.gib": 8.0})
	time.Sleep(100 * time.Millisecond)
	web, waited := bookRead(t, b, yc, bookConfig("golem.inf.mem.gib>=4"), window)
	if waited > window/2 {
		t.Errorf("the second payload's read waited %s: a window again", waited)
	}
	var who []string
	for _, p := range web {
		who = append(who, p.IssuerID)
		if p.IssuerID == "0xbig" && p.Properties["golem.com.pricing.model.linear.coeffs"].([]any)[1] != 0.0001 {
			t.Errorf("0xbig read at %v, want its latest price", p.Properties["golem.com.pricing.model.linear.coeffs"])
		}
	}
	if strings.Join(who, ",") != "0xbig,0xmem" {
		t.Errorf("web offers %v, want 0xbig (offered again with 8 GiB) and 0xmem", who)
	}
	if !b.owns("sub-1") || b.owns("sub-2") {
		t.Errorf("owns: the live page's subscription sub-1 is not told apart")
	}
	b.close()
	if b.owns("sub-1") {
		t.Errorf("owns a closed page's subscription")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subscribed) != 1 {
		t.Errorf("%d demands subscribed, want one for both payloads", len(f.subscribed))
	}
	if len(f.live) != 0 || len(f.unsubscribe) != 1 {
		t.Errorf("after close: live %v, unsubscribed %v", f.live, f.unsubscribe)
	}
	if d := f.subscribed[0]; strings.Contains(d.Constraints, "storage") || d.Properties["gcompose.resource"] != nil {
		t.Errorf("the book's demand %+v names a payload's constraint or a resource", d)
	}
}

// TestBookSubscribesAgain: a subscription yagna no longer knows (expired)
// is made again and the page keeps collecting.
func TestBookSubscribesAgain(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	b := &book{}
	defer b.close()
	bookRead(t, b, yc, bookConfig(), 50*time.Millisecond)
	f.mu.Lock()
	clear(f.live) // expired
	f.mu.Unlock()
	f.offer("0xlate", 0.0002, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := bookRead(t, b, yc, bookConfig(), 50*time.Millisecond)
		if len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the offer made after the subscription expired never came: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestBookIdle: a page no estimate reads is unsubscribed after the idle
// time, not while a read waits out a window longer than that; the next
// read subscribes again.
func TestBookIdle(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	f.offer("0xa", 0.0002, nil)
	b := &book{idle: 100 * time.Millisecond}
	defer b.close()
	if got, waited := bookRead(t, b, yc, bookConfig(), 400*time.Millisecond); len(got) != 1 || waited < 300*time.Millisecond {
		t.Fatalf("a read with a window longer than the idle time: %d offers after %s", len(got), waited)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.mu.Lock()
		live := len(f.live)
		f.mu.Unlock()
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an idle page was never unsubscribed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got, _ := bookRead(t, b, yc, bookConfig(), 50*time.Millisecond); len(got) != 1 {
		t.Errorf("after the idle page ended, a read got %d offers, want 1 (subscribed again)", len(got))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subscribed) != 2 {
		t.Errorf("%d subscriptions, want 2", len(f.subscribed))
	}
}

// TestBookSubnetsAtOnce: the pages of a preferred and a fallback subnet
// opened together (as the estimate opens them) cost one window: the
// fallback's read after the preferred one's waits nothing more.
func TestBookSubnetsAtOnce(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	b := &book{}
	defer b.close()
	window := 300 * time.Millisecond
	cfg := bookConfig()
	bookReadIn(t, b, yc, cfg, "mine", window, true)
	bookReadIn(t, b, yc, cfg, "public", window, true)
	if _, waited := bookReadIn(t, b, yc, cfg, "mine", window, false); waited < window/2 {
		t.Errorf("the preferred subnet's read waited %s, want its window", waited)
	}
	if _, waited := bookReadIn(t, b, yc, cfg, "public", window, false); waited > window/2 {
		t.Errorf("the fallback subnet's read waited %s more: a second window", waited)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subscribed) != 2 {
		t.Errorf("%d subscriptions, want one per subnet", len(f.subscribed))
	}
}

// TestBookRefreshDropsWithdrawnOffers: yagna says nothing when an offer is
// withdrawn; the page's fresh subscription (every refresh) no longer gets
// it, and its offers replace the old ones once its window has passed. The
// replaced subscription is unsubscribed, and close leaves none.
func TestBookRefreshDropsWithdrawnOffers(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}, withdrawn: map[string]bool{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	yc.Retries = -1
	f.offer("0xa", 0.0002, nil)
	f.offer("0xb", 0.0001, nil)
	window := 100 * time.Millisecond
	b := &book{refresh: 200 * time.Millisecond}
	if got, _ := bookRead(t, b, yc, bookConfig(), window); len(got) != 2 {
		t.Fatalf("first read: %d offers, want 2", len(got))
	}
	f.mu.Lock()
	f.withdrawn["0xb"] = true
	f.mu.Unlock()
	if got, _ := bookRead(t, b, yc, bookConfig(), window); len(got) != 2 {
		t.Errorf("right after the withdrawal: %d offers; the book cannot know yet (yagna says nothing)", len(got))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := bookRead(t, b, yc, bookConfig(), window)
		if len(got) == 1 && got[0].IssuerID == "0xa" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the withdrawn offer was never dropped: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.mu.Lock()
	if len(f.live) > 2 {
		t.Errorf("%d subscriptions live during refreshes, want at most 2 (the page's and a fresh one)", len(f.live))
	}
	f.mu.Unlock()
	b.close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.live) != 0 {
		t.Errorf("after close, live subscriptions %v", f.live)
	}
	if len(f.subscribed) < 2 {
		t.Errorf("%d subscriptions made, want a refresh's", len(f.subscribed))
	}
}
