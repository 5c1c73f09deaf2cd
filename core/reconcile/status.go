package reconcile

import (
	"net/http"
	"time"

	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/internal/jsonout"
)

// Status is what /healthz shows.
type Status struct {
	App      string `json:"app"`
	Interval string `json:"interval"`
	// Leader: this reconciler repairs; the others stand by.
	Leader      bool       `json:"leader"`
	LeaderSince *time.Time `json:"leader_since,omitempty"`
	// CampaignError is why the last attempt to lead failed (etcd
	// unreachable), while it keeps failing.
	CampaignError string `json:"campaign_error,omitempty"`
	InCycle       bool   `json:"in_cycle"`
	// CycleStarted is when the cycle under way (or the last) started.
	CycleStarted        time.Time  `json:"cycle_started,omitzero"`
	LastCycle           *time.Time `json:"last_cycle,omitempty"`
	LastOutcome         Outcome    `json:"last_outcome,omitempty"`
	LastError           string     `json:"last_error,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	Drifted             []Drifted  `json:"drifted"`
	Mismatches          []string   `json:"mismatches,omitempty"`
	// OK is what the HTTP status says: 200 when true, 503 when false.
	OK bool `json:"ok"`
	// Why it is not OK.
	Problem string `json:"problem,omitempty"`
}

func (r *Reconciler) setStatus(f func(*Status)) {
	r.mu.Lock()
	f(&r.status)
	r.mu.Unlock()
}

// Status is the reconciler's state now. It is OK while the loop lives: a
// leader whose cycles come on time (a cycle under way may take as long as
// a repair does: an hour), a standby that can reach etcd. The
// application's own health is in the metrics, not here: a reconciler that
// cannot repair (over budget, a mismatch) is alive and says why.
func (r *Reconciler) Status() Status {
	r.mu.Lock()
	s := r.status
	s.Drifted = append([]Drifted{}, s.Drifted...)
	s.Mismatches = append([]string(nil), s.Mismatches...)
	failures := r.failures
	r.mu.Unlock()
	s.OK = true
	now := time.Now()
	switch {
	case s.CampaignError != "":
		s.OK, s.Problem = false, "cannot campaign for leadership: "+s.CampaignError
	case s.Leader && s.InCycle && now.Sub(s.CycleStarted) > time.Hour:
		s.OK, s.Problem = false, "a cycle has run for more than an hour"
	case s.Leader && !s.InCycle && s.LastCycle != nil:
		// The longest the loop waits between cycles, with room.
		due := r.cfg.Backoff.Wait(failures, 1) + r.cfg.Backoff.Interval + time.Minute
		if now.Sub(*s.LastCycle) > due {
			s.OK, s.Problem = false, "no cycle since "+s.LastCycle.Format(time.RFC3339)
		}
	}
	return s
}

// Handler serves /metrics (Prometheus) and /healthz (Status as JSON; 503
// when it is not OK), every byte through the run's redactor.
func (r *Reconciler) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", r.cfg.Metrics.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		s := r.Status()
		w.Header().Set("Content-Type", "application/json")
		if !s.OK {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = jsonout.Line(w, s)
	})
	return redacting(mux, r.cfg.Redactor)
}

// redacting serves h with its answers masked by red, whatever h writes: the
// last error quotes a config, a drift's reason a path, and a label value
// would show a secret as it is (the names Prometheus labels carry are DNS
// labels, which its escaping leaves as they are).
func redacting(h http.Handler, red *secret.Redactor) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// A compressed answer (promhttp gzips for a scraper that accepts
		// it) would hide its text from the redactor.
		req = req.Clone(req.Context())
		req.Header.Del("Accept-Encoding")
		rw := &redactingWriter{ResponseWriter: w, out: red.Writer(w)}
		h.ServeHTTP(rw, req)
		_ = rw.out.Flush()
	})
}

// redactingWriter is an http.ResponseWriter whose body goes through a
// secret.Writer.
type redactingWriter struct {
	http.ResponseWriter
	out *secret.Writer
}

func (w *redactingWriter) WriteHeader(code int) {
	// Masking changes the body's length.
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w *redactingWriter) Write(p []byte) (int, error) {
	w.Header().Del("Content-Length")
	return w.out.Write(p)
}
