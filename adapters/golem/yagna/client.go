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
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
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
	// Retries is how many times a safe call (GET) is retried after a transport
	// error or a 502/503; 0 means the default 2, negative means none.
	Retries int
}

// New returns a client of the daemon at baseURL (e.g. http://127.0.0.1:7465).
func New(baseURL, appKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), AppKey: appKey}
}

// FromEnv builds a client from YAGNA_API_URL (default DefaultURL) and
// YAGNA_APPKEY.
func FromEnv() (*Client, error) { return FromEnvFunc(os.Getenv) }

// FromEnvFunc is FromEnv reading variables through getenv.
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

// APIError is a non-2xx answer. Message is the body's "message" (or the start
// of a non-JSON body).
type APIError struct {
	Status  int
	Message string
	Method  string
	Path    string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("yagna %s %s: %d: %s", e.Method, e.Path, e.Status, msg)
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
		retries = 2
	}
	if r.method != http.MethodGet || retries < 0 {
		retries = 0
	}
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 250 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return c.redactErr(fmt.Errorf("yagna %s %s: %w (after: %v)", r.method, r.path, ctx.Err(), lastErr))
			case <-t.C:
			}
		}
		retry, err := c.once(ctx, r, u, payload)
		if err == nil {
			return nil
		}
		lastErr = err
		if !retry || ctx.Err() != nil {
			return err
		}
		c.logger().DebugContext(ctx, "yagna call failed, retrying", "method", r.method, "path", r.path, "attempt", attempt+1, "err", err)
	}
	return lastErr
}

// once performs one attempt; retry says whether a GET may be repeated.
func (c *Client) once(ctx context.Context, r request, u string, payload []byte) (retry bool, err error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return false, c.redactErr(fmt.Errorf("yagna %s %s: %w", r.method, r.path, err))
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
		return true, c.redactErr(fmt.Errorf("yagna %s %s: %w", r.method, r.path, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	c.logger().DebugContext(ctx, "yagna call", "method", r.method, "path", r.path, "status", resp.StatusCode, "duration", time.Since(start))
	if err != nil {
		return true, c.redactErr(fmt.Errorf("yagna %s %s: reading answer: %w", r.method, r.path, err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable,
			&APIError{Status: resp.StatusCode, Message: c.redact(errorMessage(data)), Method: r.method, Path: r.path}
	}
	if r.raw != nil {
		*r.raw = data
		return false, nil
	}
	if r.out == nil || len(bytes.TrimSpace(data)) == 0 {
		if r.out != nil {
			return false, fmt.Errorf("yagna %s %s: %d with an empty body, want JSON", r.method, r.path, resp.StatusCode)
		}
		return false, nil
	}
	if err := json.Unmarshal(data, r.out); err != nil {
		return false, c.redactErr(fmt.Errorf("yagna %s %s: decoding answer: %w", r.method, r.path, err))
	}
	return false, nil
}

// errorMessage extracts {"message": ...} or the start of a plain body.
func errorMessage(data []byte) string {
	var em ErrorMessage
	if err := json.Unmarshal(data, &em); err == nil && em.Message != "" {
		return em.Message
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
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
