package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// listCall is one GET /debitNotes or /invoices the keeper made.
type listCall struct {
	path, after string
	maxItems    int // -1: not sent
	items       int
}

// listRecorder records the keeper's list calls and how many items each
// answer held.
type listRecorder struct {
	mu    sync.Mutex
	calls []listCall
}

func (l *listRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || !(strings.HasSuffix(req.URL.Path, "/debitNotes") || strings.HasSuffix(req.URL.Path, "/invoices")) {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var items []json.RawMessage
	_ = json.Unmarshal(body, &items)
	c := listCall{path: req.URL.Path, after: req.URL.Query().Get("afterTimestamp"), maxItems: -1, items: len(items)}
	if m := req.URL.Query().Get("maxItems"); m != "" {
		c.maxItems, _ = strconv.Atoi(m)
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	return resp, nil
}

func (l *listRecorder) take() []listCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// TestKeeperRescanReadsOnlyWhatIsNew: on a node holding a long history of
// debit notes (3000, one a minute), the keeper's sweeps list in bounded
// pages (maxItems), and every sweep after the first reads only what is
// dated within the look-back before the newest it has seen
// (afterTimestamp), not the whole history every 30 s: the old keeper
// listed all 3000 notes in one answer each time, and on a node old enough
// the client's 64 MiB cap would have failed it.
func TestKeeperRescanReadsOnlyWhatIsNew(t *testing.T) {
	const history = 3000
	e := startDevnet(t, devnet.Config{History: history})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc := e.allocation(ctx)
	rec := &listRecorder{}
	yc := yagna.New(e.url, appKey)
	yc.HTTP = &http.Client{Transport: rec}
	k := &payments.Keeper{YC: yc, App: e.app, Allocation: alloc, Log: testLogger(t)}

	if err := k.Sweep(ctx); err != nil {
		t.Fatalf("first sweep: %v", err)
	}
	first := rec.take()
	notes := 0
	for _, c := range first {
		if c.maxItems < 0 || c.maxItems > payments.ScanPage || c.items > payments.ScanPage {
			t.Errorf("first sweep: %+v, want pages of at most %d", c, payments.ScanPage)
		}
		if strings.HasSuffix(c.path, "/debitNotes") {
			notes += c.items
		}
	}
	if notes < history {
		t.Errorf("the first sweep read %d debit notes of the %d the node holds", notes, history)
	}

	if err := k.Sweep(ctx); err != nil {
		t.Fatalf("second sweep: %v", err)
	}
	second := rec.take()
	for _, c := range second {
		// The node has no invoice: reading them from the start reads only what is new.
		notes := strings.HasSuffix(c.path, "/debitNotes")
		if (notes && c.after == "") || c.maxItems < 0 || c.maxItems > payments.ScanPage || c.items > payments.ScanPage {
			t.Errorf("second sweep: %+v, want only what is new, in bounded pages", c)
		}
		if notes && c.items > int(payments.RescanLookback/time.Minute)+1 {
			t.Errorf("second sweep read %d debit notes; the look-back holds %d", c.items, int(payments.RescanLookback/time.Minute))
		}
	}
	t.Logf("first sweep: %d list calls; second: %d (%+v)", len(first), len(second), second)
}
