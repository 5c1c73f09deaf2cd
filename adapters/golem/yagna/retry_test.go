package yagna

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// script answers each request with the next of its replies (the last one
// repeats) and counts the calls.
type script struct {
	mu      sync.Mutex
	replies []reply
	calls   int
}

type reply struct {
	status int
	body   string
	hangup bool // close the connection without an answer
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rp := s.replies[min(s.calls, len(s.replies)-1)]
	s.calls++
	s.mu.Unlock()
	if rp.hangup {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rp.status)
	_, _ = io.WriteString(w, rp.body)
}

func (s *script) n() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestRetryPolicy(t *testing.T) {
	ok := reply{status: 200, body: `{"allocationId":"a","totalAmount":"1","spentAmount":"0","remainingAmount":"1","timestamp":"2026-01-01T00:00:00Z","makeDeposit":false}`}
	gsb := reply{status: 500, body: `{"message":"GSB error: endpoint address not found"}`}
	accept := func(c *Client) error {
		return c.AcceptDebitNote(context.Background(), "dn", DebitNoteAcceptance{TotalAmountAccepted: "1", AllocationID: "a"}, time.Second)
	}
	getAlloc := func(c *Client) error { _, err := c.GetAllocation(context.Background(), "a"); return err }
	tests := []struct {
		name      string
		replies   []reply
		call      func(*Client) error
		wantCalls int
		wantErr   bool
	}{
		{"GET retried after 503 and 504", []reply{{status: 503}, {status: 504}, ok}, getAlloc, 3, false},
		{"GET retried after a cut connection", []reply{{hangup: true}, ok}, getAlloc, 2, false},
		{"GET gives up after the retries", []reply{{status: 502}}, getAlloc, 1 + DefaultRetries, true},
		{"GET 500 is an answer, not retried", []reply{gsb, ok}, getAlloc, 1, true},
		{"GET 408 is an answer (long polls say 'no news' with it)", []reply{{status: 408}, ok}, getAlloc, 1, true},
		{"GET 404 not retried", []reply{{status: 404}, ok}, getAlloc, 1, true},
		{"a bad answer body is not retried", []reply{{status: 200, body: `{`}, ok}, getAlloc, 1, true},
		{"accept retried after 408 (yagna's ack timeout)", []reply{{status: 408}, {status: 200}}, accept, 2, false},
		{"accept retried after 504", []reply{{status: 504}, {status: 200}}, accept, 2, false},
		{"accept 400 not retried", []reply{{status: 400, body: `{"message":"Invalid amount accepted"}`}, {status: 200}}, accept, 1, true},
		{"create allocation never retried", []reply{{status: 503}, ok}, func(c *Client) error {
			_, err := c.CreateAllocation(context.Background(), NewAllocation{TotalAmount: "1"})
			return err
		}, 1, true},
		{"create activity never retried after a cut connection", []reply{{hangup: true}, {status: 201, body: `{"activityId":"x"}`}}, func(c *Client) error {
			_, err := c.CreateActivity(context.Background(), "agr")
			return err
		}, 1, true},
		{"release allocation retried", []reply{{status: 503}, {status: 200}}, func(c *Client) error {
			return c.ReleaseAllocation(context.Background(), "a")
		}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{replies: tt.replies}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c := New(srv.URL, testKey)
			c.Backoff = time.Millisecond
			err := tt.call(c)
			if (err != nil) != tt.wantErr || s.n() != tt.wantCalls {
				t.Fatalf("err = %v after %d calls; want error %v after %d", err, s.n(), tt.wantErr, tt.wantCalls)
			}
		})
	}
}

func TestRetryStopsWithTheContext(t *testing.T) {
	s := &script{replies: []reply{{status: 503}}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := New(srv.URL, testKey)
	c.Backoff = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetAllocation(ctx, "a")
	if err == nil || time.Since(start) > 5*time.Second || s.n() != 1 {
		t.Fatalf("err = %v after %v and %d calls", err, time.Since(start), s.n())
	}
}

func TestYagnaDownIsATransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	c := New("http://"+addr, testKey)
	c.Backoff = time.Millisecond
	_, err = c.GetActivityState(context.Background(), "act")
	if !IsTransport(err) || IsProviderUnreachable(err) {
		t.Fatalf("err = %v: IsTransport %v, IsProviderUnreachable %v", err, IsTransport(err), IsProviderUnreachable(err))
	}
	for _, st := range []int{408, 500, 504} {
		if e := (&APIError{Status: st}); !IsProviderUnreachable(e) || IsTransport(e) {
			t.Errorf("%d: IsProviderUnreachable %v, IsTransport %v", st, IsProviderUnreachable(e), IsTransport(e))
		}
	}
}

func TestBackoff(t *testing.T) {
	for attempt := 1; attempt <= 12; attempt++ {
		want := min(DefaultBackoff<<(attempt-1), MaxBackoff)
		for range 50 {
			d := Backoff(0, attempt)
			if d < want/2 || d > want {
				t.Fatalf("Backoff(0, %d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

// batchServer answers exec-result polls from a script and activity state
// with state.
type batchServer struct {
	polls *script
	state string
}

func (b batchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/state") {
		_, _ = io.WriteString(w, b.state)
		return
	}
	b.polls.ServeHTTP(w, r)
}

func TestWaitBatchTransientErrors(t *testing.T) {
	done := reply{status: 200, body: `[{"index":0,"eventDate":"2026-01-01T00:00:00Z","result":"Ok","isBatchFinished":true}]`}
	gsb := reply{status: 500, body: `{"message":"GSB error: GSB failure: Bad request: endpoint address not found"}`}
	ready := `{"state":["Ready",null]}`
	tests := []struct {
		name      string
		polls     []reply
		state     string
		wantCalls int
		wantErr   string
	}{
		{"GSB 500, 504 and 408 are ridden out", []reply{gsb, {status: 504}, {status: 408, body: `{"message":"Timeout"}`}, gsb, done}, ready, 5, ""},
		{"another 500 fails at once", []reply{{status: 500, body: `{"message":"database is locked"}`}, done}, ready, 1, "database is locked"},
		{"a terminated activity ends the wait", []reply{gsb, done}, `{"state":["Terminated",null],"reason":"provider shut down"}`, 1, "terminated"},
		{"too many failures in a row", []reply{gsb}, ready, MaxPollFailures + 1, "polls in a row failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			polls := &script{replies: tt.polls}
			srv := httptest.NewServer(batchServer{polls: polls, state: tt.state})
			defer srv.Close()
			c := New(srv.URL, testKey)
			c.Backoff = time.Millisecond
			res, err := c.WaitBatch(context.Background(), "act", "batch", time.Second)
			if tt.wantErr == "" {
				if err != nil || len(res) != 1 || !res[0].IsBatchFinished {
					t.Fatalf("WaitBatch = %v, %v", res, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if polls.n() != tt.wantCalls {
				t.Fatalf("%d polls, want %d", polls.n(), tt.wantCalls)
			}
		})
	}
}
