package service

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// The market watcher: the offer book (book.go) kept warm across runs of
// gcompose. A served golem-service adapter lives for one run, and its book
// with it, so every plan of a new service waited one offer window. The
// watcher is a long-lived container, one per yagna URL and requestor
// identity, like the payments keeper (adapters/golem/payments): the
// golem-payments image run with WatchArg, launched by the payments
// adapter's check while the servers start, adopted (or started) by the
// payments resource's state call (the first call of every plan and deploy
// of a Golem app, and the image that holds the Docker socket), stopped when
// the last app that registered with it is destroyed, or after DefaultWatchIdle
// without a request. It keeps each payload's broad demand subscribed and
// its offers current (book.go: a new price comes as a new proposal, a
// withdrawn offer is dropped by the refresh), and unsubscribes them all
// when it stops.
//
// It listens on an abstract Unix socket (WatchSocket), which every container
// on the host network (the Golem adapters' network) reaches without a port
// or a file, and answers only requests that carry WatchToken, which only
// holders of the app key can compute: the key itself reaches the watcher
// on its stdin, never in its environment, arguments or labels.

// WatchArg is the argument that runs the image as the market watcher.
const WatchArg = "watch"

// WatchRefreshEnv, in gcompose's environment, sets how often the watcher
// started subscribes each demand anew (book.go bookRefresh: the bound on
// how long a withdrawn offer stays in the book after its window).
const WatchRefreshEnv = "GCOMPOSE_OFFER_REFRESH"

// DefaultWatchIdle is how long the watcher runs without a request.
const DefaultWatchIdle = 15 * time.Minute

// DefaultWatchGone is how long the watcher keeps running while its yagna
// does not answer at all: a yagna that was stopped (a devnet closed, a
// daemon shut down) has no demands left to unsubscribe and no offers to
// watch, and a watcher left waiting for its idle timeout would be a
// container nobody runs.
const DefaultWatchGone = time.Minute

// watchVersion is the watcher's API version: a watcher of another version
// is stopped and started anew by the adapter that finds it. 2: POST
// /v1/drop, and demands that name their watcher (WatchIDProperty).
const watchVersion = "2"

// WatchProperty marks the watcher's demands (not an app's: no sweep of an
// app ends them; the watcher does when it stops).
const WatchProperty = "gcompose.offer-watcher"

// WatchIDProperty names, on each demand the watcher subscribes, the
// watcher (watchID: its yagna URL and identity). A watcher killed with
// SIGKILL unsubscribes nothing; the next watcher of the same yagna and
// identity finds its demands by this property in the identity's demands
// (GET /market-api/v1/demands lists the caller's own: yagna
// core/market/src/rest_api/requestor.rs get_demands,
// core/market/src/market.rs get_demands → store.get_client_demands) and
// unsubscribes them before it serves (unsubscribeOrphans). A sibling of
// WatchProperty, not a child: a property is a leaf of the properties tree.
const WatchIDProperty = "gcompose.offer-watcher-id"

// watchID is what identifies a watcher: its yagna and requestor identity.
func watchID(url, identity string) string {
	sum := sha256.Sum256([]byte(url + "|" + identity))
	return hex.EncodeToString(sum[:8])
}

// WatchSocket is the abstract Unix socket of the watcher of yagna at url
// for identity.
func WatchSocket(url, identity string) string {
	return "@gcompose-offerwatch-" + watchID(url, identity)
}

// WatchContainer is the container name of that watcher.
func WatchContainer(url, identity string) string {
	return "gcompose-offerwatch-" + watchID(url, identity)[:12]
}

// WatchToken is the bearer token of the watcher of an app key.
func WatchToken(appKey string) string {
	m := hmac.New(sha256.New, []byte(appKey))
	m.Write([]byte("gcompose-offer-watcher"))
	return hex.EncodeToString(m.Sum(nil))
}

// WatchStatus is the watcher's answer to a ping.
type WatchStatus struct {
	Version  string   `json:"version"`
	URL      string   `json:"url"`
	Identity string   `json:"identity"`
	Apps     []string `json:"apps"`
	Pages    int      `json:"pages"`
}

type watchOpen struct {
	Key      string                `json:"key"`
	Broad    yagna.DemandOfferBase `json:"broad"`
	Demand   yagna.DemandOfferBase `json:"demand"`
	WindowMS int64                 `json:"window_ms"`
}

type watchOpened struct {
	LeftMS int64 `json:"left_ms"`
}

// watchDrop names an offer that yagna says is gone: its provider and its
// properties (the offer's own, the same in every demand's proposal of it:
// core/market/src/db/model/proposal.rs new_requestor copies
// offer.properties).
type watchDrop struct {
	Provider   string         `json:"provider"`
	Properties map[string]any `json:"properties"`
}

type watchOffers struct {
	Offers   []*yagna.Proposal `json:"offers"`
	WaitedMS int64             `json:"waited_ms"`
}

// watcher is the server side.
type watcher struct {
	yc       *yagna.Client
	log      *slog.Logger
	identity string
	token    string
	b        *book
	idle     time.Duration
	gone     time.Duration
	stop     context.CancelFunc

	mu      sync.Mutex
	apps    map[string]bool
	lastUse time.Time
	// stopping: no page is opened any more.
	stopping bool
}

// RunWatcher is the container's main (WatchArg): the yagna client of the
// secrets on stdin, serving until ctx ends, it is idle, or the last app is
// released; then it unsubscribes every demand and returns.
func RunWatcher(ctx context.Context, yc *yagna.Client, args []string, stdout io.Writer, log *slog.Logger) int {
	fs := flag.NewFlagSet(WatchArg, flag.ContinueOnError)
	idle := fs.Duration("idle", DefaultWatchIdle, "stop after this long without a request")
	gone := fs.Duration("gone", DefaultWatchGone, "stop after yagna has not answered for this long")
	refresh := fs.Duration("refresh", bookRefresh, "subscribe each demand anew this often (drops withdrawn offers)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	me, err := yc.Me(ctx)
	if err != nil {
		log.Error("asking yagna who it is", "err", err)
		return 1
	}
	ln, err := net.Listen("unix", WatchSocket(yc.BaseURL, me.Identity))
	if err != nil {
		log.Error("listening", "err", err)
		return 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &watcher{yc: yc, log: log, identity: me.Identity, token: WatchToken(yc.AppKey), b: &book{idle: *idle, refresh: *refresh},
		idle: *idle, gone: *gone, stop: cancel, apps: map[string]bool{}, lastUse: time.Now()}
	// The socket is this watcher's: no other of this yagna and identity
	// runs, so the demands marked as theirs are a dead one's.
	w.unsubscribeOrphans(ctx)
	srv := &http.Server{Handler: w.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintln(stdout, "gcompose:ready")
	log.Info("market watcher ready", "yagna", yc.BaseURL, "identity", me.Identity, "idle", *idle, "refresh", *refresh)
	w.wait(ctx)
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	// The demands go first: once nothing listens, a client may take the
	// watcher for gone (WatchClient.Gone) and check that none is left.
	w.b.close()
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = srv.Shutdown(sctx)
	scancel()
	log.Info("market watcher stopped: its demands are unsubscribed")
	return 0
}

// wait returns when ctx ends, the watcher has been idle for w.idle, or its
// yagna has answered nothing for w.gone.
func (w *watcher) wait(ctx context.Context) {
	t := time.NewTicker(max(10*time.Millisecond, min(time.Second, w.idle/4, w.gone/4)))
	defer t.Stop()
	lastAnswer, lastAsk := time.Now(), time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		unused := time.Since(w.lastUse)
		w.mu.Unlock()
		if unused > w.idle {
			w.log.Info("market watcher idle", "for", unused.Round(time.Second))
			return
		}
		// Any answer, even an error status, is a yagna that runs; only a
		// transport failure (refused, reset, timed out) counts as gone.
		if time.Since(lastAsk) >= min(10*time.Second, max(w.gone/4, 10*time.Millisecond)) {
			lastAsk = time.Now()
			actx, cancel := context.WithTimeout(ctx, min(5*time.Second, max(w.gone/2, 10*time.Millisecond)))
			_, err := w.yc.Me(actx)
			cancel()
			if err == nil || !yagna.IsTransport(err) {
				lastAnswer = time.Now()
			} else if ctx.Err() == nil && time.Since(lastAnswer) > w.gone {
				w.log.Info("market watcher stopping: yagna does not answer", "for", time.Since(lastAnswer).Round(time.Second), "err", err)
				return
			}
		}
	}
}

// unsubscribeOrphans unsubscribes the demands a watcher of this yagna and
// identity left subscribed (killed, it could not): those marked with its
// WatchIDProperty. What fails is logged: yagna expires them in the end.
func (w *watcher) unsubscribeOrphans(ctx context.Context) {
	id := watchID(w.yc.BaseURL, w.identity)
	demands, err := w.yc.Demands(ctx)
	if err != nil {
		w.log.Warn("market watcher: listing the demands a watcher before it left", "err", err)
		return
	}
	n := 0
	for _, d := range demands {
		if d.Properties[WatchIDProperty] != id {
			continue
		}
		if err := w.yc.UnsubscribeDemand(ctx, d.DemandID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			w.log.Warn("market watcher: unsubscribing a demand a watcher before it left", "demand", d.DemandID, "err", err)
			continue
		}
		n++
	}
	if n > 0 {
		w.log.Info("market watcher: unsubscribed the demands a stopped watcher left", "demands", n)
	}
}

// mark is the broad demand as the watcher subscribes it: named as its own
// (WatchIDProperty).
func (w *watcher) mark(d yagna.DemandOfferBase) yagna.DemandOfferBase {
	props := make(map[string]any, len(d.Properties)+1)
	for k, v := range d.Properties {
		props[k] = v
	}
	props[WatchIDProperty] = watchID(w.yc.BaseURL, w.identity)
	return yagna.DemandOfferBase{Properties: props, Constraints: d.Constraints}
}

func (w *watcher) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/ping", w.ping)
	mux.HandleFunc("POST /v1/apps/{app}", w.register)
	mux.HandleFunc("DELETE /v1/apps/{app}", w.release)
	mux.HandleFunc("POST /v1/open", w.open)
	mux.HandleFunc("POST /v1/read", w.read)
	mux.HandleFunc("POST /v1/drop", w.drop)
	mux.HandleFunc("POST /v1/stop", func(rw http.ResponseWriter, r *http.Request) { rw.WriteHeader(http.StatusNoContent); w.stop() })
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !hmac.Equal([]byte(r.Header.Get("Authorization")), []byte("Bearer "+w.token)) {
			http.Error(rw, "wrong token", http.StatusUnauthorized)
			return
		}
		w.mu.Lock()
		w.lastUse = time.Now()
		stopping := w.stopping
		w.mu.Unlock()
		if stopping && r.Method == http.MethodPost {
			http.Error(rw, "market watcher stopping", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(rw, r)
	})
}

func (w *watcher) ping(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	st := WatchStatus{Version: watchVersion, URL: w.yc.BaseURL, Identity: w.identity, Apps: []string{}}
	for a := range w.apps {
		st.Apps = append(st.Apps, a)
	}
	w.mu.Unlock()
	w.b.mu.Lock()
	st.Pages = len(w.b.pages)
	w.b.mu.Unlock()
	writeJSONTo(rw, st)
}

func (w *watcher) register(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	w.apps[r.PathValue("app")] = true
	w.mu.Unlock()
	rw.WriteHeader(http.StatusNoContent)
}

// release forgets an app (destroyed); the watcher stops once none is left.
// An app registers as "name/lineage": the plans made before its first
// deploy, which had no state and so no lineage yet, registered "name/",
// which goes with it.
func (w *watcher) release(rw http.ResponseWriter, r *http.Request) {
	app := r.PathValue("app")
	w.mu.Lock()
	delete(w.apps, app)
	if i := strings.LastIndex(app, "/"); i >= 0 {
		delete(w.apps, app[:i+1])
	}
	left := len(w.apps)
	w.mu.Unlock()
	writeJSONTo(rw, map[string]int{"left": left})
	if left == 0 {
		w.log.Info("market watcher: the last app was released")
		w.stop()
	}
}

func (w *watcher) open(rw http.ResponseWriter, r *http.Request) {
	var q watchOpen
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	window := time.Duration(q.WindowMS) * time.Millisecond
	p, err := w.b.page(r.Context(), w.yc, w.log, bookDemand{key: q.Key, demand: w.mark(q.Broad)}, window)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSONTo(rw, watchOpened{LeftMS: max(0, time.Until(p.began.Add(window)).Milliseconds())})
}

func (w *watcher) read(rw http.ResponseWriter, r *http.Request) {
	var q watchOpen
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	offers, waited, err := w.b.read(r.Context(), w.yc, w.log, bookDemand{key: q.Key, demand: w.mark(q.Broad)}, q.Demand, time.Duration(q.WindowMS)*time.Millisecond, nil)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSONTo(rw, watchOffers{Offers: offers, WaitedMS: waited.Milliseconds()})
}

// drop takes an offer yagna says is gone out of every page at once
// (book.drop).
func (w *watcher) drop(rw http.ResponseWriter, r *http.Request) {
	var q watchDrop
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || q.Provider == "" {
		http.Error(rw, fmt.Sprintf("want {provider, properties}: %v", err), http.StatusBadRequest)
		return
	}
	n := w.b.drop(q.Provider, q.Properties)
	w.log.Info("market watcher: an offer yagna says is gone left the book", "provider", q.Provider, "pages", n)
	writeJSONTo(rw, map[string]int{"dropped": n})
}

func writeJSONTo(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(v)
}

// WatchClient talks to the watcher of one yagna and identity.
type WatchClient struct {
	socket, token string
	hc            *http.Client
}

// NewWatchClient is the client of the watcher of yagna at url for identity,
// authenticated by appKey.
func NewWatchClient(yagnaURL, identity, appKey string) *WatchClient {
	socket := WatchSocket(yagnaURL, identity)
	return &WatchClient{socket: socket, token: WatchToken(appKey), hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}}
}

// ErrNoWatcher is returned when no watcher listens.
var ErrNoWatcher = errors.New("no market watcher running")

func (c *WatchClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://watcher"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("%w (%s): %v", ErrNoWatcher, c.socket, err)
		}
		return fmt.Errorf("market watcher %s: %s %s: %w", c.socket, method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("market watcher %s: %s %s: %s: %s", c.socket, method, path, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("market watcher %s: %s %s: %w", c.socket, method, path, err)
		}
	}
	return nil
}

// Ping asks the watcher how it is.
func (c *WatchClient) Ping(ctx context.Context) (WatchStatus, error) {
	var st WatchStatus
	err := c.call(ctx, http.MethodGet, "/v1/ping", nil, &st)
	if err == nil && st.Version != watchVersion {
		return st, fmt.Errorf("market watcher %s speaks version %q, want %q", c.socket, st.Version, watchVersion)
	}
	return st, err
}

// Register tells the watcher an app uses it.
func (c *WatchClient) Register(ctx context.Context, app string) error {
	return c.call(ctx, http.MethodPost, "/v1/apps/"+url.PathEscape(app), nil, nil)
}

// Release tells the watcher an app is gone; it answers how many are left
// (none: it stops).
func (c *WatchClient) Release(ctx context.Context, app string) (int, error) {
	var out struct {
		Left int `json:"left"`
	}
	err := c.call(ctx, http.MethodDelete, "/v1/apps/"+url.PathEscape(app), nil, &out)
	return out.Left, err
}

// Stop stops the watcher.
func (c *WatchClient) Stop(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/v1/stop", nil, nil)
}

// Gone waits until nothing listens on the watcher's socket (it stopped and
// unsubscribed its demands), up to ctx.
func (c *WatchClient) Gone(ctx context.Context) error {
	for {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", c.socket)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil
		}
		conn.Close()
		select {
		case <-ctx.Done():
			return fmt.Errorf("market watcher %s still listens: %w", c.socket, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// open opens the page of bd (subscribing its demand when it has none) and
// says how much of its first window is left.
func (c *WatchClient) open(ctx context.Context, bd bookDemand, window time.Duration) (time.Duration, error) {
	var out watchOpened
	err := c.call(ctx, http.MethodPost, "/v1/open", watchOpen{Key: bd.key, Broad: bd.demand, WindowMS: window.Milliseconds()}, &out)
	return time.Duration(out.LeftMS) * time.Millisecond, err
}

// drop tells the watcher that yagna says the provider's offer of these
// properties is gone (withdrawn): its pages drop it at once.
func (c *WatchClient) drop(ctx context.Context, provider string, props map[string]any) error {
	return c.call(ctx, http.MethodPost, "/v1/drop", watchDrop{Provider: provider, Properties: props}, nil)
}

// read is book.read through the watcher.
func (c *WatchClient) read(ctx context.Context, bd bookDemand, d yagna.DemandOfferBase, window time.Duration) ([]*yagna.Proposal, time.Duration, error) {
	var out watchOffers
	err := c.call(ctx, http.MethodPost, "/v1/read", watchOpen{Key: bd.key, Broad: bd.demand, Demand: d, WindowMS: window.Milliseconds()}, &out)
	return out.Offers, time.Duration(out.WaitedMS) * time.Millisecond, err
}
