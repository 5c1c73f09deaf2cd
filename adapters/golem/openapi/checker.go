package openapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Checker collects the violations of every exchange it sees, either as
// server middleware (Handler) or as a client transport (Transport). Safe for
// concurrent use.
type Checker struct {
	Spec *Spec
	// SkipRequests / SkipResponses turn one side off (e.g. a server test that
	// sends deliberately bad requests still wants its answers checked).
	SkipRequests, SkipResponses bool
	// Exempt, when set, exempts the answers it reports true for from the
	// response check (e.g. a server's deliberate answers beyond the spec,
	// such as yagna's 408 for an unreachable provider: devnet.BeyondSpec).
	Exempt func(status int, header http.Header) bool

	mu   sync.Mutex
	errs []error
	seen map[string]int // operationId -> exchanges
}

// NewChecker returns a Checker of the embedded specs.
func NewChecker() (*Checker, error) {
	s, err := Default()
	if err != nil {
		return nil, err
	}
	return &Checker{Spec: s}, nil
}

func (c *Checker) record(method, target string, reqErr, respErr error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reqErr != nil {
		c.errs = append(c.errs, reqErr)
	}
	if respErr != nil {
		c.errs = append(c.errs, respErr)
	}
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	p, _, _ := strings.Cut(target, "?")
	if op, _, err := c.Spec.Find(method, p); err == nil {
		c.seen[op.ID]++
	}
}

// Errors returns the violations so far.
func (c *Checker) Errors() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// Seen returns how many exchanges each operationId had.
func (c *Checker) Seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.seen))
	for k, v := range c.seen {
		out[k] = v
	}
	return out
}

// TB is the part of testing.TB that Report uses.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
}

// Report fails t with every violation seen.
func (c *Checker) Report(t TB) {
	t.Helper()
	for _, err := range c.Errors() {
		t.Errorf("OpenAPI contract: %v", err)
	}
}

func (c *Checker) checkReq(method, target string, body []byte) error {
	if c.SkipRequests {
		return nil
	}
	return c.Spec.CheckRequest(method, target, body)
}

func (c *Checker) checkResp(method, target string, status int, contentType string, body []byte) error {
	if c.SkipResponses {
		return nil
	}
	if !c.SkipRequests {
		// an exchange with no operation is reported once, by the request side
		p, _, _ := strings.Cut(target, "?")
		if _, _, err := c.Spec.Find(method, p); err != nil {
			return nil
		}
	}
	return c.Spec.CheckResponseOf(method, target, status, contentType, body)
}

// Handler wraps a server handler: every request and the answer it gets are
// checked. Websocket upgrades are checked on the request side only and passed
// through untouched.
func (c *Checker) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.RequestURI()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			c.record(r.Method, target, fmt.Errorf("%s %s: reading request body: %w", r.Method, target, err), nil)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		reqErr := c.checkReq(r.Method, target, body)
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			c.record(r.Method, target, reqErr, nil)
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if r.Context().Err() != nil {
			// The client went away before the answer: nobody reads it, and a
			// handler that stops on the request's context writes none (net/http
			// would report the 200 it never chose).
			c.record(r.Method, target, reqErr, nil)
			return
		}
		res := rec.Result()
		respBody := rec.Body.Bytes()
		var respErr error
		if c.Exempt == nil || !c.Exempt(res.StatusCode, res.Header) {
			respErr = c.checkResp(r.Method, target, res.StatusCode, res.Header.Get("Content-Type"), respBody)
		}
		c.record(r.Method, target, reqErr, respErr)
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(res.StatusCode)
		_, _ = w.Write(respBody)
	})
}

// Transport wraps a client transport (nil: http.DefaultTransport): every
// request the client sends and every answer it gets are checked. Paths are
// taken relative to the server's root.
func (c *Checker) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper{c: c, base: base}
}

type roundTripper struct {
	c    *Checker
	base http.RoundTripper
}

func (rt roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading request body: %w", err)
		}
		body = b
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	target := r.URL.RequestURI()
	reqErr := rt.c.checkReq(r.Method, target, body)
	resp, err := rt.base.RoundTrip(r)
	if err != nil {
		rt.c.record(r.Method, target, reqErr, nil)
		return nil, err
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rt.c.record(r.Method, target, reqErr, nil)
		return resp, nil
	}
	rb, rerr := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	if rerr != nil {
		rt.c.record(r.Method, target, reqErr, nil)
		return resp, nil
	}
	var respErr error
	if rt.c.Exempt == nil || !rt.c.Exempt(resp.StatusCode, resp.Header) {
		respErr = rt.c.checkResp(r.Method, target, resp.StatusCode, resp.Header.Get("Content-Type"), rb)
	}
	rt.c.record(r.Method, target, reqErr, respErr)
	return resp, nil
}
