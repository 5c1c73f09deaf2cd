package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// startWatcher runs RunWatcher in process against f, as the container
// runs it, and returns its client and its exit status channel.
func startWatcher(t *testing.T, f *fakeMarket, args ...string) (*WatchClient, *yagna.Client, chan int) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return startWatcherOn(t, f, srv, args...)
}

// startWatcherOn is startWatcher on a fake market already served.
func startWatcherOn(t *testing.T, f *fakeMarket, srv *httptest.Server, args ...string) (*WatchClient, *yagna.Client, chan int) {
	t.Helper()
	yc := yagna.New(srv.URL, "k-"+t.Name())
	yc.Retries = -1
	out := &syncBuf{ready: make(chan struct{})}
	done := make(chan int, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- RunWatcher(ctx, yc, args, out, slog.New(slog.DiscardHandler)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the watcher did not stop")
		}
	})
	select {
	case <-out.ready:
	case code := <-done:
		t.Fatalf("the watcher exited with %d before it was ready", code)
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher never said it was ready")
	}
	return NewWatchClient(yc.BaseURL, "0xrequestor", yc.AppKey), yc, done
}

type syncBuf struct {
	ready chan struct{}
	said  bool
}

func (b *syncBuf) Write(p []byte) (int, error) {
	if !b.said && strings.Contains(string(p), "gcompose:ready") {
		b.said = true
		close(b.ready)
	}
	return len(p), nil
}

var _ io.Writer = (*syncBuf)(nil)

// TestWatcherKeepsTheBookAcrossRuns: a first reader opens a page and waits
// its window (cold); a second one, as the next gcompose run's adapter with
// a new client, reads at once (warm). The watcher's demand carries no app
// tag and is marked as its own; releasing the last app stops it, and its
// demand is unsubscribed before its socket goes. A wrong token is refused.
func TestWatcherKeepsTheBookAcrossRuns(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	f.offer("0xa", 0.0002, nil)
	wc, yc, done := startWatcher(t, f)
	ctx := t.Context()
	if _, err := NewWatchClient(yc.BaseURL, "0xrequestor", "other key").Ping(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("ping with another key's token: %v, want 401", err)
	}
	if _, err := NewWatchClient(yc.BaseURL, "0xother", yc.AppKey).Ping(ctx); !errors.Is(err, ErrNoWatcher) {
		t.Errorf("another identity's watcher: %v, want ErrNoWatcher", err)
	}
	if err := wc.Register(ctx, "app1/lin"); err != nil {
		t.Fatal(err)
	}
	// app2's first plan, before it had a state and so a lineage.
	if err := wc.Register(ctx, "app2/"); err != nil {
		t.Fatal(err)
	}
	if err := wc.Register(ctx, "app2/lin"); err != nil {
		t.Fatal(err)
	}
	cfg := bookConfig()
	window := 300 * time.Millisecond
	d, bd := watchDemand(t, yc, cfg)
	left, err := wc.open(ctx, bd.shared(), window)
	if err != nil || left < window/2 {
		t.Fatalf("a cold page: %s left of its window, %v; want most of it", left, err)
	}
	offers, waited, err := wc.read(ctx, bd.shared(), d, window)
	if err != nil || len(offers) != 1 || waited < window/2 {
		t.Fatalf("cold read: %d offers after %s, %v", len(offers), waited, err)
	}
	// The next run: a new client, the same page, no window.
	next := NewWatchClient(yc.BaseURL, "0xrequestor", yc.AppKey)
	if left, err := next.open(ctx, bd.shared(), window); err != nil || left != 0 {
		t.Errorf("warm page: %s left, %v; want 0", left, err)
	}
	offers, waited, err = next.read(ctx, bd.shared(), d, window)
	if err != nil || len(offers) != 1 || waited > window/3 {
		t.Errorf("warm read: %d offers after %s, %v; want 1 at once", len(offers), waited, err)
	}
	f.mu.Lock()
	sub := f.subscribed[0]
	f.mu.Unlock()
	if sub.Properties["gcompose.app"] != nil || sub.Properties[WatchProperty] != true {
		t.Errorf("the watcher's demand %v: want no app tag and %s", sub.Properties, WatchProperty)
	}
	if left, err := wc.Release(ctx, "app1/lin"); err != nil || left != 2 {
		t.Fatalf("release app1: %d left, %v", left, err)
	}
	if _, err := wc.Ping(ctx); err != nil {
		t.Fatalf("the watcher stopped with an app left: %v", err)
	}
	if left, err := wc.Release(ctx, "app2/lin"); err != nil || left != 0 {
		t.Fatalf("release app2: %d left, %v", left, err)
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := wc.Gone(gctx); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	live := len(f.live)
	f.mu.Unlock()
	if live != 0 {
		t.Errorf("%d demand(s) live once the watcher's socket is gone", live)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit status %d", code)
		}
		done <- code
	case <-time.After(5 * time.Second):
		t.Error("RunWatcher did not return after the last app was released")
	}
}

// TestWatcherIdle: a watcher nobody asks stops after --idle and leaves no
// demand.
func TestWatcherIdle(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	wc, yc, done := startWatcher(t, f, "--idle", "300ms")
	d, bd := watchDemand(t, yc, bookConfig())
	if _, _, err := wc.read(t.Context(), bd.shared(), d, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		done <- code
	case <-time.After(5 * time.Second):
		t.Fatal("an idle watcher did not stop")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.live) != 0 {
		t.Errorf("an idle watcher left %d demand(s)", len(f.live))
	}
}

// TestWatcherStopsWhenYagnaIsGone: a watcher whose yagna stopped answering
// (a devnet closed, a daemon stopped) stops on its own instead of running
// until its idle timeout.
func TestWatcherStopsWhenYagnaIsGone(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	yc := yagna.New(srv.URL, "k-"+t.Name())
	yc.Retries = -1
	out := &syncBuf{ready: make(chan struct{})}
	done := make(chan int, 1)
	go func() {
		done <- RunWatcher(t.Context(), yc, []string{"--gone", "400ms"}, out, slog.New(slog.DiscardHandler))
	}()
	select {
	case <-out.ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the watcher never said it was ready")
	}
	// Running while yagna answers.
	select {
	case code := <-done:
		t.Fatalf("the watcher stopped (%d) while its yagna answered", code)
	case <-time.After(time.Second):
	}
	srv.CloseClientConnections()
	srv.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher still runs 10 s after its yagna went away")
	}
}

func watchDemand(t *testing.T, yc *yagna.Client, cfg Config) (yagna.DemandOfferBase, bookDemand) {
	t.Helper()
	cons, err := cfg.ConstraintsIn("public")
	if err != nil {
		t.Fatal(err)
	}
	d := yagna.DemandOfferBase{Constraints: cons, Properties: map[string]any{
		"golem.srv.comp.expiration": time.Now().Add(time.Hour).UnixMilli(), "golem.node.debug.subnet": "public",
		"golem.srv.comp.task_package": "hash:sha3:" + cfg.Payload.Params["image_hash"].(string) + ":http://x",
		"gcompose.app":                cfg.App,
	}}
	bd, err := broadDemand(yc.BaseURL, cfg, "public", d)
	if err != nil {
		t.Fatal(err)
	}
	return d, bd
}

// TestCreateReadsTheWarmBook: a create whose plan left no view of the
// market (a saved plan applied later, a reconciler) takes the watcher's
// warm book as its hint, the offers best first, the providers it avoids
// left out; a cold page gives none (the create then waits its window).
func TestCreateReadsTheWarmBook(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	terms := map[string]any{"golem.com.payment.debit-notes.accept-timeout?": 240.0}
	f.offer("0xdear", 0.0002, terms)
	f.offer("0xcheap", 0.0001, terms)
	f.offer("0xfailed", 0.00005, terms)
	wc, yc, _ := startWatcher(t, f)
	cfg := bookConfig()
	cfg.Payload.Params["offer_window"] = "200ms"
	cfg.image = &Image{Hash: strings.Repeat("a", 56), URL: "http://x"} // as the create resolved it
	m, err := cfg.Market()
	if err != nil {
		t.Fatal(err)
	}
	exp, err := cfg.Expiration()
	if err != nil {
		t.Fatal(err)
	}
	req := &sdk.Request{Request: protocol.Request{Name: "s", Gcompose: &protocol.RequestExt{Call: protocol.CallAction}}, Log: slog.New(slog.DiscardHandler)}
	r := &rental{yc: yc, req: req, cfg: cfg, wc: wc, id: Identity{Failed: []string{"0xfailed"}}}
	if h := r.bookHint(t.Context(), m, exp); h != nil {
		t.Fatalf("a cold page gave a hint: %+v", h)
	}
	time.Sleep(300 * time.Millisecond)
	h := r.bookHint(t.Context(), m, exp)
	if h == nil || len(h.Offers) != 2 || h.Offers[0].Provider != "0xcheap" || h.Offers[1].Provider != "0xdear" || h.Subnet != "public" {
		t.Fatalf("warm book hint %+v, want 0xcheap then 0xdear in public", h)
	}
}

// TestWatcherUnsubscribesADeadWatchersDemands: a watcher killed with
// SIGKILL leaves its demands subscribed; the next watcher of the same
// yagna and identity unsubscribes them before it serves, and leaves the
// demands of an app and of another watcher (another yagna URL) alone. Its
// own demands name it. Fails without unsubscribeOrphans (the dead one's
// demand stays live).
func TestWatcherUnsubscribesADeadWatchersDemands(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	yc := yagna.New(srv.URL, "k")
	ctx := t.Context()
	var dead, app, other string
	for _, d := range []struct {
		id    *string
		props map[string]any
	}{
		{&dead, map[string]any{WatchProperty: true, WatchIDProperty: watchID(srv.URL, "0xrequestor")}},
		{&app, map[string]any{"gcompose.app": "app"}},
		{&other, map[string]any{WatchProperty: true, WatchIDProperty: watchID("http://other:7465", "0xrequestor")}},
	} {
		id, err := yc.SubscribeDemand(ctx, yagna.DemandOfferBase{Properties: d.props, Constraints: "()"})
		if err != nil {
			t.Fatal(err)
		}
		*d.id = id
	}
	// The next watcher: startWatcher serves on the same fake market.
	wc, wyc, _ := startWatcherOn(t, f, srv)
	f.mu.Lock()
	live := map[string]bool{dead: f.live[dead], app: f.live[app], other: f.live[other]}
	f.mu.Unlock()
	if live[dead] || !live[app] || !live[other] {
		t.Fatalf("after the next watcher's start: the dead watcher's demand live %v, the app's %v, another watcher's %v; want false, true, true", live[dead], live[app], live[other])
	}
	_, bd := watchDemand(t, wyc, bookConfig())
	if _, err := wc.open(ctx, bd.shared(), 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	mine := f.subscribed[len(f.subscribed)-1]
	f.mu.Unlock()
	if mine.Properties[WatchIDProperty] != watchID(srv.URL, "0xrequestor") || mine.Properties[WatchProperty] != true {
		t.Errorf("the watcher's demand %v does not name it", mine.Properties)
	}
}

// TestWatcherDropsAGoneOffer: a create told by yagna that the offer it
// countered is gone tells the watcher, whose page drops it at once (not a
// refresh later); another offer of the same provider, at a new price,
// stays.
func TestWatcherDropsAGoneOffer(t *testing.T) {
	f := &fakeMarket{live: map[string]bool{}, sent: map[string]int{}}
	f.offer("0xa", 0.0002, nil)
	f.offer("0xb", 0.0003, nil)
	wc, yc, _ := startWatcher(t, f)
	ctx := t.Context()
	d, bd := watchDemand(t, yc, bookConfig())
	window := 200 * time.Millisecond
	offers, _, err := wc.read(ctx, bd.shared(), d, window)
	if err != nil || len(offers) != 2 {
		t.Fatalf("read: %d offers, %v; want 2", len(offers), err)
	}
	var a *yagna.Proposal
	for _, o := range offers {
		if o.IssuerID == "0xa" {
			a = o
		}
	}
	// Another offer's properties do not drop it.
	other := map[string]any{"golem.com.pricing.model.linear.coeffs": []any{0.0001, 0.0009, 0}}
	if err := wc.drop(ctx, "0xa", other); err != nil {
		t.Fatal(err)
	}
	if offers, _, _ := wc.read(ctx, bd.shared(), d, window); len(offers) != 2 {
		t.Fatalf("after dropping an offer 0xa does not have: %d offers, want 2", len(offers))
	}
	if err := wc.drop(ctx, "0xa", a.Properties); err != nil {
		t.Fatal(err)
	}
	offers, _, err = wc.read(ctx, bd.shared(), d, window)
	if err != nil || len(offers) != 1 || offers[0].IssuerID != "0xb" {
		t.Fatalf("after the drop: %v, %v; want 0xb's offer alone", offers, err)
	}
}

// offerGone tells a counter-proposal's failure for the offer's end from
// one for our own demand's and from other failures, by yagna's messages
// (core/market/src/negotiation/error.rs ProposalValidationError).
func TestOfferGone(t *testing.T) {
	api := func(status int, msg string) error { return &yagna.APIError{Status: status, Message: msg} }
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{api(400, "Subscription [offer-1] was already unsubscribed."), true},
		{api(400, "Subscription [offer-1] wasn't found."), true},
		{api(410, "Subscription [offer-1] expired."), true},
		{api(400, "Subscription [our-sub] wasn't found."), false},
		{api(410, "Subscription [our-sub] expired."), false},
		{api(500, "Subscription [offer-1] was already unsubscribed."), false},
		{api(400, "Can't react to own Proposal [p]."), false},
		{errors.New("Subscription [offer-1] was already unsubscribed."), false},
	} {
		if got := offerGone(tc.err, "our-sub"); got != tc.want {
			t.Errorf("offerGone(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
