package devnet

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
)

// Options configure a Server.
type Options struct {
	Config Config
	// AppKey is the key clients must present (Authorization: Bearer <key>, or ?authToken= on websockets).
	AppKey string
	// Docker is the Engine API client used for activities and VPNs.
	Docker *client.Client
	Logger *slog.Logger
	// SelfContainer is the id or name of the container the devnet runs in, if any: the payload containers
	// mount the volume (or bind mount) of it that holds VPNDir, to reach the VPN relay's socket
	// (vpnrelay.go). Empty when the devnet runs on the Docker host, where they bind-mount VPNDir itself.
	SelfContainer string
	// VPNDir is the directory of the VPN relay's unix socket. Empty: DefaultVPNDir in a container, a
	// temporary directory on the host.
	VPNDir string
	// EngineTimeout bounds how long the engine may take to answer one call before the devnet takes it
	// for hung and fails the request that needed it (engine); 0: enginecall.DefaultBound.
	EngineTimeout time.Duration
	// Init is the path of the static devnet-init binary put into every payload container as its PID 1
	// and VPN join (payload.go); empty: devnet-init beside the executable, then /devnet-init.
	Init string
}

// Server is one devnet instance. Create it with New, serve Handler, and Close it to remove what it created.
type Server struct {
	cfg    Config
	appKey string
	docker *engine
	log    *slog.Logger
	self   string
	owner  string // this devnet, as labelOwner names it
	// initTar is devnet-init archived for the payload containers (payload.go), or initErr why not.
	initTar []byte
	initErr error
	// initShared is devnet-init's path in the payload containers when they run it from the relay's
	// directory (initshare.go); empty: it is copied into each.
	initShared string

	// lookupMu guards lookups, the image lookups by hash in progress (docker.go resolveImage), and
	// entrypoints, the ENTRYPOINT and CMD of the images by ID (payload.go payloadConfig).
	lookupMu    sync.Mutex
	lookups     map[string]*lookup
	entrypoints map[string][]string
	// relay carries the VPNs' packets and tunnels (vpnrelay.go).
	relay *relay

	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu          sync.Mutex
	changed     chan struct{}
	faults      Faults
	providers   []*provider
	demands     map[string]*demand
	proposals   map[string]*proposal
	agreements  map[string]*agreement
	agrEvents   []agreementEvent
	activities  map[string]*activity
	allocations map[string]*allocation
	released    map[string]bool // allocation ids released
	debitNotes  map[string]*debitNote
	invoices    map[string]*invoice
	debitEvents []paymentEvent
	invEvents   []paymentEvent
	networks    map[string]*vpn
	accounts    map[string]*account
	lastEvent   time.Time
}

// New checks the configuration, removes leftovers of this instance from Docker, and starts the
// provider-side background work (debit notes, timeouts, liveness).
func New(ctx context.Context, o Options) (*Server, error) {
	cfg, err := o.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.AppKey == "" {
		return nil, errors.New("devnet: an app key is required")
	}
	if o.Docker == nil {
		return nil, errors.New("devnet: a Docker client is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		cfg: cfg, appKey: o.AppKey, docker: newEngine(o.Docker, o.EngineTimeout), log: log.With("devnet", cfg.Instance), self: o.SelfContainer, owner: ownerOf(o.SelfContainer),
		changed:     make(chan struct{}),
		faults:      cfg.Faults,
		demands:     map[string]*demand{},
		proposals:   map[string]*proposal{},
		agreements:  map[string]*agreement{},
		activities:  map[string]*activity{},
		allocations: map[string]*allocation{},
		released:    map[string]bool{},
		debitNotes:  map[string]*debitNote{},
		invoices:    map[string]*invoice{},
		networks:    map[string]*vpn{},
		accounts:    map[string]*account{},
		lookups:     map[string]*lookup{},
		entrypoints: map[string][]string{},
	}
	initBin, initTar, initErr := loadInit(o.Init)
	s.initTar, s.initErr = initTar, initErr
	if s.initErr != nil {
		log.Warn("activities cannot be deployed", "err", s.initErr)
	}
	for plat, funds := range cfg.Accounts {
		amt, _ := parseAmount(funds) // checked by withDefaults
		s.accounts[plat] = &account{platform: plat, funds: amt}
	}
	if err := s.initProviders(); err != nil {
		return nil, err
	}
	s.seedHistory(cfg.History)
	if err := s.cleanupDocker(ctx); err != nil {
		return nil, fmt.Errorf("devnet: removing leftovers of instance %s: %w", cfg.Instance, err)
	}
	if err := s.sweepOrphans(ctx); err != nil {
		s.log.Warn("removing what devnets that are gone left", "err", err)
	}
	selfMounts, err := s.selfMounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("devnet: %w", err)
	}
	s.relay = newRelay(s.log, o.VPNDir, selfMounts, s.self != "")
	if s.relay.err != nil {
		s.log.Warn("nodes cannot join VPNs", "err", s.relay.err)
	}
	if s.initErr == nil {
		var err error
		s.initShared, err = s.relay.shareInit(initBin)
		s.log.Debug("devnet-init, the payload containers' PID 1", "is", sharedInitNote(s.initShared, err))
	}
	s.bgCtx, s.bgCancel = context.WithCancel(context.Background())
	s.bg.Add(1)
	go s.providerLoop()
	s.log.Info("devnet ready", "providers", len(s.providers), "requestor", cfg.Identity)
	return s, nil
}

// Close stops the background work and removes every container and network of this instance, and what
// devnets that are gone left (sweepOrphans).
func (s *Server) Close(ctx context.Context) error {
	s.bgCancel()
	s.bg.Wait()
	s.relay.close()
	err := s.cleanupDocker(ctx)
	if serr := s.sweepOrphans(ctx); serr != nil {
		s.log.Warn("removing what devnets that are gone left", "err", serr)
	}
	return err
}

// Identity is the requestor node id served by GET /me.
func (s *Server) Identity() string { return s.cfg.Identity }

// Handler serves the yagna API and the devnet admin API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.slow(h)) }
	api("GET /me", s.getIdentity)
	mux.HandleFunc("GET /version/get", s.getVersion)
	s.routeMarket(api)
	s.routeActivity(api)
	s.routePayment(api)
	s.routeNet(api)
	s.routeAdmin(mux.HandleFunc)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, r.URL.Path)
	})
	// The image registry's API (registry.go) needs no app key, as the registry's.
	return s.withRegistry(s.auth(exactPaths(mux)))
}

// exactPaths answers 404 for a path that is not in clean form ("/activity//kill", an empty id): yagna
// serves its API with actix-web and no path-normalizing middleware (core/serv/src/main.rs: Logger, Auth
// and Cors only), and actix matches a {param} segment against [^/]+, so such a path matches no route.
// Go's ServeMux would instead redirect it to the cleaned path, and a client that does not follow (curl
// -f among them) would take the 3xx for success: a kill of an empty activity id killed nothing, and said
// nothing.
func exactPaths(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		clean := path.Clean(p)
		if strings.HasSuffix(p, "/") && clean != "/" {
			clean += "/"
		}
		if clean != p {
			writeError(w, http.StatusNotFound, "no such endpoint: %s %s", r.Method, p)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// auth requires the app key everywhere except GET /version/get (which the spec leaves open).
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/version/get" {
			next.ServeHTTP(w, r)
			return
		}
		key := ""
		if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
			key = strings.TrimPrefix(h, "Bearer ")
		} else if strings.HasPrefix(r.URL.Path, "/net-api/") && strings.Contains(r.URL.Path, "/tcp/") {
			key = r.URL.Query().Get("authToken")
		}
		// As yagna's auth middleware: 401 text/plain (core/serv-api/web/src/middleware/auth/mod.rs,
		// ErrorUnauthorized("Missing application key" / "Invalid application key")).
		if key == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.appKey)) != 1 {
			msg := "Invalid application key"
			if key == "" {
				msg = "Missing application key"
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, msg)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// slow applies the "slow answers" fault knob.
func (s *Server) slow(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		d := s.faults.Slow.Duration
		s.mu.Unlock()
		if d > 0 {
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return
			}
		}
		h(w, r)
	})
}

func (s *Server) getIdentity(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"identity": s.cfg.Identity, "name": s.cfg.Name, "role": "manager"})
}

func (s *Server) getVersion(w http.ResponseWriter, r *http.Request) {
	v := map[string]any{"version": "0.16.0", "name": "v0.16.0 gcompose devnet", "seen": true, "releaseTs": "2024-06-01T00:00:00"}
	writeJSON(w, http.StatusOK, map[string]any{"current": v})
}

// notify wakes every long poll; the caller holds s.mu.
func (s *Server) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// now returns a timestamp strictly after the previous one, so that afterTimestamp polling never loses events;
// the caller holds s.mu.
func (s *Server) now() time.Time {
	t := time.Now().UTC()
	if !t.After(s.lastEvent) {
		t = s.lastEvent.Add(time.Microsecond)
	}
	s.lastEvent = t
	return t
}

// longPoll calls collect (under s.mu) until it reports ready or the timeout passes, and returns its last value.
func longPoll[T any](s *Server, ctx context.Context, timeout time.Duration, collect func() (T, bool)) T {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		v, ok := collect()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return v
		}
		select {
		case <-ch:
		case <-deadline.C:
			s.mu.Lock()
			v, _ = collect()
			s.mu.Unlock()
			return v
		case <-ctx.Done():
			return v
		}
	}
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("devnet: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

type errorMessage struct {
	Message string `json:"message"`
}

// writeProblem answers an RFC 7807 problem (application/problem+json), as yagna's payment API does for
// allocation validation (core/payment/src/api/allocations/api_error.rs); ext are its extension members.
func writeProblem(w http.ResponseWriter, status int, typ, instance, detail string, ext map[string]any) {
	body := map[string]any{"type": typ, "detail": detail}
	if instance != "" {
		body["instance"] = instance
	}
	for k, v := range ext {
		body[k] = v
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

// writeBare answers a status for which the spec declares no body (e.g. 410 of unsubscribeDemand).
func writeBare(w http.ResponseWriter, status int) { w.WriteHeader(status) }

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, errorMessage{Message: fmt.Sprintf(format, args...)})
}

// readJSON decodes a request body; it writes a 400 and returns false on failure.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: %v", err)
		return false
	}
	return true
}

// pollTimeout reads the "timeout" query parameter (seconds, float, default 5).
func pollTimeout(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	q := r.URL.Query().Get("timeout")
	if q == "" {
		return 5 * time.Second, true
	}
	f, err := strconv.ParseFloat(q, 64)
	if err != nil || f < 0 {
		writeError(w, http.StatusBadRequest, "timeout must be a non-negative number of seconds, got %q", q)
		return 0, false
	}
	if f > 600 {
		f = 600
	}
	return time.Duration(f * float64(time.Second)), true
}

// maxEvents reads "maxEvents" (1..100, default 10).
func maxEvents(w http.ResponseWriter, r *http.Request) (int, bool) {
	q := r.URL.Query().Get("maxEvents")
	if q == "" {
		return 10, true
	}
	n, err := strconv.Atoi(q)
	if err != nil || n < 1 || n > 100 {
		writeError(w, http.StatusBadRequest, "maxEvents must be an integer in 1..100, got %q", q)
		return 0, false
	}
	return n, true
}

// afterTimestamp reads "afterTimestamp" (RFC 3339).
func afterTimestamp(w http.ResponseWriter, r *http.Request) (time.Time, bool) {
	q := r.URL.Query().Get("afterTimestamp")
	if q == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "afterTimestamp must be an RFC 3339 date-time, got %q", q)
		return time.Time{}, false
	}
	return t, true
}
