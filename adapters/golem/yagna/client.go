// Package yagna is the Go client of the yagna daemon's REST API (Market,
// Activity, Payment, Net, identity), shared by the golem-network and
// golem-service adapters and by the devnet's tests. Types and JSON names follow
// golemfactory/ya-client's OpenAPI files (see types.go); every request the
// client sends is checked against them in this package's contract test.
//
// The app key travels only in the Authorization header ("Bearer <key>"); it is
// redacted from every error the client returns and never logged.
package yagna

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/internal/backoff"
)

// API prefixes, as the specs' servers.
const (
	MarketPrefix   = "/market-api/v1"
	ActivityPrefix = "/activity-api/v1"
	PaymentPrefix  = "/payment-api/v1"
	NetPrefix      = "/net-api/v1"
)

// DefaultURL is where yagna listens unless YAGNA_API_URL says otherwise.
const DefaultURL = "http://127.0.0.1:7465"

// Client talks to one yagna daemon. The zero HTTP uses http.DefaultClient; a
// nil Logger logs nothing. Safe for concurrent use once configured.
type Client struct {
	BaseURL string
	AppKey  string
	HTTP    *http.Client
	Logger  *slog.Logger
	// Retries is how many times a call that is safe to repeat (a GET, an
	// accept, a release) is retried after a transient failure; 0 means
	// DefaultRetries, negative means none.
	Retries int
	// Backoff is the pause before the first retry, doubled for each further
	// one up to MaxBackoff, with jitter; 0 means DefaultBackoff.
	Backoff time.Duration
}

// Retry defaults. yapapi repeats the calls it deems safe up to 5 times
// (yapapi/rest/common.py repeat_on_error, yapapi/rest/payment.py); golem-js
// backs off exponentially up to 15 s (src/activity/exe-script-executor.ts).
const (
	DefaultRetries = 4
	DefaultBackoff = 250 * time.Millisecond
	MaxBackoff     = 5 * time.Second
)

// retryPolicy says which failures of a call may be repeated.
type retryPolicy int

const (
	// retryNever: the call creates something (a demand, an agreement, an
	// activity, a batch); repeating it after an unknown outcome could make
	// a second one.
	retryNever retryPolicy = iota
	// retryTransient: transport errors (connection refused or reset, EOF)
	// and 502/503/504 answers.
	retryTransient
	// retryTransient408 adds 408: yagna answers it when the provider did
	// not acknowledge in time (an accept: core/payment/src/api/debit_notes.rs
	// "Timeout accepting Debit Note on remote Node"), and yapapi's
	// is_intermittent_error counts it as intermittent. Only for calls whose
	// 408 is not "no news yet" (long polls answer 408 to say that).
	retryTransient408
)

// New returns a client of the daemon at baseURL (e.g. http://127.0.0.1:7465).
func New(baseURL, appKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), AppKey: appKey}
}

// FromEnvFunc builds a client from YAGNA_API_URL (default DefaultURL) and
// YAGNA_APPKEY, read through getenv.
func FromEnvFunc(getenv func(string) string) (*Client, error) {
	base := strings.TrimSpace(getenv("YAGNA_API_URL"))
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("YAGNA_API_URL %q: want an http(s) URL with a host", base)
	}
	key := getenv("YAGNA_APPKEY")
	if key == "" {
		return nil, errors.New("YAGNA_APPKEY is not set")
	}
	return New(base, key), nil
}

// String describes the client without its app key.
func (c *Client) String() string {
	return fmt.Sprintf("yagna.Client{BaseURL: %q, AppKey: [REDACTED]}", c.BaseURL)
}

// GoString is String, so %#v does not print the app key either.
func (c *Client) GoString() string { return c.String() }

// LogValue keeps the app key out of slog output.
func (c *Client) LogValue() slog.Value {
	return slog.GroupValue(slog.String("baseURL", c.BaseURL), slog.String("appKey", "[REDACTED]"))
}

// APIError is a non-2xx answer. Message is the body's "message", or the
// "detail" of an RFC 7807 problem (in full: it is what tells the user what to
// do, e.g. "Insufficient funds to create the allocation. Top up your account
// ..."), or the start of a non-JSON body.
type APIError struct {
	Status  int
	Message string
	Method  string
	Path    string
	// Problem is the RFC 7807 body, when the answer was one.
	Problem *Problem
	// Answered is the status yagna sent when the client reports another in
	// Status (a VPN's 403 as 404: see ownedNet); 0 otherwise.
	Answered int
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Problem != nil {
		if facts := e.Problem.facts(); facts != "" {
			msg += " (" + facts + ")"
		}
	}
	status := e.Status
	if e.Answered != 0 {
		status = e.Answered
	}
	return fmt.Sprintf("yagna %s %s: %d: %s", e.Method, e.Path, status, msg)
}

// facts lists a problem's extension members that say something about the
// failure, sorted by name; requestBody (our own request echoed) is left out.
func (p *Problem) facts() string {
	keys := make([]string, 0, len(p.Extensions))
	for k := range p.Extensions {
		if k != "requestBody" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := p.Extensions[k]
		if s, ok := v.(string); ok {
			parts = append(parts, k+" "+s)
			continue
		}
		b, _ := json.Marshal(v)
		parts = append(parts, k+" "+string(b))
	}
	return strings.Join(parts, ", ")
}

// IsProblem reports an RFC 7807 answer whose type or instance ends with
// suffix, e.g. "insufficient-account-funds".
func IsProblem(err error, suffix string) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Problem == nil {
		return false
	}
	return strings.HasSuffix(ae.Problem.Type, suffix) || strings.HasSuffix(ae.Problem.Instance, suffix)
}

// StatusOf is the HTTP status of an *APIError in err's chain, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound reports a 404 answer.
func IsNotFound(err error) bool { return StatusOf(err) == http.StatusNotFound }

// IsGone reports a 410 answer.
func IsGone(err error) bool { return StatusOf(err) == http.StatusGone }

// IsTimeout reports a 408 answer (a long poll or wait that should be repeated).
func IsTimeout(err error) bool { return StatusOf(err) == http.StatusRequestTimeout }

// IsConflict reports a 409 answer.
func IsConflict(err error) bool { return StatusOf(err) == http.StatusConflict }

// transportError is a call that got no (complete) answer: yagna down,
// restarting, or the connection cut.
type transportError struct{ err error }

func (e *transportError) Error() string { return e.err.Error() }
func (e *transportError) Unwrap() error { return e.err }

// IsTransport reports a call that got no answer from yagna at all
// (connection refused or reset, a cut answer): yagna itself is down or
// unreachable, as opposed to yagna answering that a provider is.
func IsTransport(err error) bool {
	var te *transportError
	return errors.As(err, &te)
}

// redactedError carries a message with the app key removed and keeps the
// original error for errors.Is/As (context.Canceled, *url.Error, ...).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

const redacted = "[REDACTED]"

func (c *Client) redact(s string) string {
	if c.AppKey == "" {
		return s
	}
	s = strings.ReplaceAll(s, c.AppKey, redacted)
	if esc := url.QueryEscape(c.AppKey); esc != c.AppKey {
		s = strings.ReplaceAll(s, esc, redacted)
	}
	return s
}

func (c *Client) redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := c.redact(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// request describes one call.
type request struct {
	method string
	path   string // with prefix, segments already escaped
	query  url.Values
	body   any // JSON-encoded when non-nil
	out    any // decoded from a 2xx body when non-nil
	// raw, when non-nil, receives the undecoded 2xx body instead of out.
	raw *[]byte
	// retry overrides the policy; the zero value means retryTransient for
	// GET and retryNever for anything else.
	retry retryPolicy
}

func (r request) policy() retryPolicy {
	if r.retry != retryNever {
		return r.retry
	}
	if r.method == http.MethodGet {
		return retryTransient
	}
	return retryNever
}

// Backoff returns the pause before retry number attempt (1, 2, ...): base
// doubled attempt-1 times, capped at MaxBackoff, then drawn uniformly from
// its upper half so that clients that failed together do not retry
// together. internal/backoff centres its jitter on the wait: the upper
// half [d/2, d] of a wait d is 3/4 of it, ±1/3.
func Backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = DefaultBackoff
	}
	p := backoff.Policy{Base: base * 3 / 4, Max: MaxBackoff * 3 / 4, Jitter: 1.0 / 3}
	return p.Delay(max(attempt-1, 0), rand.Float64())
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

func (c *Client) do(ctx context.Context, r request) error {
	var payload []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return fmt.Errorf("yagna %s %s: encoding body: %w", r.method, r.path, err)
		}
		payload = b
	}
	u := c.BaseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	retries := c.Retries
	if retries == 0 {
		retries = DefaultRetries
	}
	policy := r.policy()
	if policy == retryNever || retries < 0 {
		retries = 0
	}
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, Backoff(c.Backoff, attempt)); err != nil {
				return c.redactErr(fmt.Errorf("yagna %s %s: %w (after: %v)", r.method, r.path, err, lastErr))
			}
		}
		err := c.once(ctx, r, u, payload)
		if err == nil {
			return nil
		}
		lastErr = err
		if !policy.repeats(err) || ctx.Err() != nil {
			return err
		}
		c.logger().DebugContext(ctx, "yagna call failed, retrying", "method", r.method, "path", r.path, "attempt", attempt+1, "err", err)
	}
	return lastErr
}

// repeats tells whether a failed try may be repeated under the policy.
func (p retryPolicy) repeats(err error) bool {
	if p == retryNever {
		return false
	}
	if IsTransport(err) {
		return true
	}
	switch StatusOf(err) {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusRequestTimeout:
		return p == retryTransient408
	}
	return false
}

// once performs one attempt.
func (c *Client) once(ctx context.Context, r request, u string, payload []byte) error {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return c.redactErr(fmt.Errorf("yagna %s %s: %w", r.method, r.path, err))
	}
	if c.AppKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.AppKey)
	}
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return c.redactErr(&transportError{fmt.Errorf("yagna %s %s: %w", r.method, r.path, err)})
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	c.logger().DebugContext(ctx, "yagna call", "method", r.method, "path", r.path, "status", resp.StatusCode, "duration", time.Since(start))
	if err != nil {
		return c.redactErr(&transportError{fmt.Errorf("yagna %s %s: reading answer: %w", r.method, r.path, err)})
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{Status: resp.StatusCode, Method: r.method, Path: r.path}
		ae.Message, ae.Problem = errorMessage(data)
		ae.Message = c.redact(ae.Message)
		if ae.Problem != nil {
			ae.Problem.Detail = c.redact(ae.Problem.Detail)
			for k, v := range ae.Problem.Extensions {
				if s, ok := v.(string); ok {
					ae.Problem.Extensions[k] = c.redact(s)
				}
			}
		}
		return ae
	}
	if r.raw != nil {
		*r.raw = data
		return nil
	}
	if r.out == nil || len(bytes.TrimSpace(data)) == 0 {
		if r.out != nil {
			return fmt.Errorf("yagna %s %s: %d with an empty body, want JSON", r.method, r.path, resp.StatusCode)
		}
		return nil
	}
	if err := json.Unmarshal(data, r.out); err != nil {
		return c.redactErr(fmt.Errorf("yagna %s %s: decoding answer: %w", r.method, r.path, err))
	}
	return nil
}

// errorMessage extracts {"message": ...}, an RFC 7807 problem's detail (in
// full) or title, or the start of a plain body.
func errorMessage(data []byte) (string, *Problem) {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err == nil {
		if msg, ok := m["message"].(string); ok && msg != "" {
			return msg, nil
		}
		// {"message":null}: yagna's ErrorMessage with no message (the payment API's
		// response::not_found(), core/payment/src/utils.rs); the status says it all.
		if v, ok := m["message"]; ok && v == nil && len(m) == 1 {
			return "", nil
		}
		if p := problemOf(m); p != nil {
			if p.Detail != "" {
				return p.Detail, p
			}
			return p.Title, p
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s, nil
}

// problemOf reads an RFC 7807 object; nil when m has neither detail nor title.
func problemOf(m map[string]any) *Problem {
	str := func(k string) string { s, _ := m[k].(string); return s }
	p := &Problem{Type: str("type"), Title: str("title"), Detail: str("detail"), Instance: str("instance"), Extensions: map[string]any{}}
	if p.Detail == "" && p.Title == "" {
		return nil
	}
	if f, ok := m["status"].(float64); ok {
		p.Status = int(f)
	}
	for k, v := range m {
		switch k {
		case "type", "title", "status", "detail", "instance":
		default:
			p.Extensions[k] = v
		}
	}
	return p
}

// seconds formats a timeout the way the specs want it (float seconds).
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// pollQuery builds timeout / maxEvents / afterTimestamp query parameters;
// timeout < 0 and maxEvents <= 0 are left out (server defaults).
func pollQuery(timeout time.Duration, maxEvents int, after time.Time) url.Values {
	q := url.Values{}
	if timeout >= 0 {
		q.Set("timeout", seconds(timeout))
	}
	if maxEvents > 0 {
		q.Set("maxEvents", strconv.Itoa(maxEvents))
	}
	if !after.IsZero() {
		q.Set("afterTimestamp", after.UTC().Format(time.RFC3339Nano))
	}
	return q
}

// Me returns the requestor's identity (GET /me).
func (c *Client) Me(ctx context.Context) (Identity, error) {
	var id Identity
	err := c.do(ctx, request{method: http.MethodGet, path: "/me", out: &id})
	return id, err
}

// Version returns yagna's version (GET /version/get).
func (c *Client) Version(ctx context.Context) (VersionResponse, error) {
	var v VersionResponse
	err := c.do(ctx, request{method: http.MethodGet, path: "/version/get", out: &v})
	return v, err
}
