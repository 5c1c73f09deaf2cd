package yagna_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// wireDir holds the goldens of yagna's real answers, written from its Rust
// source (testdata/wire/README.md says how).
const wireDir = "testdata/wire"

// golden is one file of wireDir.
type golden struct {
	Endpoint    string          `json:"endpoint"`
	Case        string          `json:"case"`
	Status      int             `json:"status"`
	ContentType *string         `json:"content_type"`
	Body        json.RawMessage `json:"body"`
	BodyText    *string         `json:"body_text"`
	Optional    []string        `json:"optional"`
}

// wireCalls calls, for each endpoint of the goldens, the client method that
// reads it; the value is what the client decoded.
var wireCalls = map[string]func(ctx context.Context, c *yagna.Client) (any, error){
	"GET /net-api/v1/net": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Networks(ctx) },
	"POST /net-api/v1/net": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.CreateNetwork(ctx, yagna.NewNetwork{IP: "192.168.0.0/24"})
	},
	"GET /net-api/v1/net/{id}":           func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetNetwork(ctx, "n") },
	"DELETE /net-api/v1/net/{id}":        func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.DeleteNetwork(ctx, "n") },
	"GET /net-api/v1/net/{id}/addresses": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Addresses(ctx, "n") },
	"POST /net-api/v1/net/{id}/addresses": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.AddAddress(ctx, "n", "192.168.0.2")
	},
	"GET /net-api/v1/net/{id}/nodes": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Nodes(ctx, "n") },
	"POST /net-api/v1/net/{id}/nodes": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.AddNode(ctx, "n", yagna.Node{ID: "0xp", IP: "192.168.0.2"})
	},
	"DELETE /net-api/v1/net/{id}/nodes/{nodeId}": func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.RemoveNode(ctx, "n", "0xp") },

	"GET /market-api/v1/agreements": func(ctx context.Context, c *yagna.Client) (any, error) { return c.ListAgreements(ctx, "", "") },
	"POST /market-api/v1/agreements": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.CreateAgreement(ctx, "R-p", time.Now())
	},
	"GET /market-api/v1/agreements/{id}":                  func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetAgreement(ctx, "a") },
	"GET /market-api/v1/agreements/{id}/terminate/reason": func(ctx context.Context, c *yagna.Client) (any, error) { return c.TerminateReason(ctx, "a") },
	"POST /market-api/v1/agreements/{id}/terminate": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.TerminateAgreement(ctx, "a", yagna.TerminationReason("done"))
	},
	"POST /market-api/v1/agreements/{id}/cancel":  func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.CancelAgreement(ctx, "a", nil) },
	"POST /market-api/v1/agreements/{id}/confirm": func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.ConfirmAgreement(ctx, "a", "") },
	"POST /market-api/v1/agreements/{id}/wait": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.WaitForApproval(ctx, "a", time.Second)
	},
	"GET /market-api/v1/agreementEvents": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.AgreementEvents(ctx, time.Second, time.Time{}, 10, "")
	},
	"GET /market-api/v1/demands": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Demands(ctx) },
	"POST /market-api/v1/demands": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.SubscribeDemand(ctx, yagna.DemandOfferBase{})
	},
	"DELETE /market-api/v1/demands/{id}": func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.UnsubscribeDemand(ctx, "d") },
	"GET /market-api/v1/demands/{id}/events": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.CollectOffers(ctx, "d", time.Second, 10)
	},
	"GET /market-api/v1/demands/{id}/proposals/{pid}": func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetProposal(ctx, "d", "R-p") },
	"POST /market-api/v1/demands/{id}/proposals/{pid}": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.CounterProposal(ctx, "d", "R-p", yagna.DemandOfferBase{})
	},
	"POST /market-api/v1/demands/{id}/proposals/{pid}/reject": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.RejectProposal(ctx, "d", "R-p", nil)
	},

	"POST /activity-api/v1/activity":               func(ctx context.Context, c *yagna.Client) (any, error) { return c.CreateActivity(ctx, "a") },
	"DELETE /activity-api/v1/activity/{id}":        func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.DestroyActivity(ctx, "x") },
	"GET /activity-api/v1/activity/{id}/agreement": func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetActivityAgreement(ctx, "x") },
	"GET /activity-api/v1/activity/{id}/state":     func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetActivityState(ctx, "x") },
	"GET /activity-api/v1/activity/{id}/usage":     func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetActivityUsage(ctx, "x") },
	"POST /activity-api/v1/activity/{id}/exec":     func(ctx context.Context, c *yagna.Client) (any, error) { return c.ExecCommands(ctx, "x") },
	"GET /activity-api/v1/activity/{id}/exec/{batchId}": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.ExecBatchResults(ctx, "x", "b", time.Second, -1)
	},

	"GET /payment-api/v1/allocations": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Allocations(ctx) },
	"POST /payment-api/v1/allocations": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.CreateAllocation(ctx, yagna.NewAllocation{TotalAmount: "1"})
	},
	"GET /payment-api/v1/allocations/{id}": func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetAllocation(ctx, "al") },
	"PUT /payment-api/v1/allocations/{id}": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.AmendAllocation(ctx, "al", yagna.AllocationUpdate{})
	},
	"DELETE /payment-api/v1/allocations/{id}": func(ctx context.Context, c *yagna.Client) (any, error) { return nil, c.ReleaseAllocation(ctx, "al") },
	"GET /payment-api/v1/requestorAccounts":   func(ctx context.Context, c *yagna.Client) (any, error) { return c.RequestorAccounts(ctx) },
	"GET /payment-api/v1/demandDecorations":   func(ctx context.Context, c *yagna.Client) (any, error) { return c.DemandDecorations(ctx, "al") },
	"GET /payment-api/v1/debitNoteEvents": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.DebitNoteEvents(ctx, time.Second, time.Time{}, 10)
	},
	"GET /payment-api/v1/debitNotes":      func(ctx context.Context, c *yagna.Client) (any, error) { return c.DebitNotes(ctx, time.Time{}, 0) },
	"GET /payment-api/v1/debitNotes/{id}": func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetDebitNote(ctx, "dn") },
	"POST /payment-api/v1/debitNotes/{id}/accept": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.AcceptDebitNote(ctx, "dn", yagna.DebitNoteAcceptance{TotalAmountAccepted: "1", AllocationID: "al"}, time.Second)
	},
	"POST /payment-api/v1/debitNotes/{id}/reject": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.RejectDebitNote(ctx, "dn", yagna.Rejection{}, time.Second)
	},
	"POST /payment-api/v1/invoices/{id}/reject": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.RejectInvoice(ctx, "inv", yagna.Rejection{}, time.Second)
	},
	"GET /payment-api/v1/invoiceEvents": func(ctx context.Context, c *yagna.Client) (any, error) {
		return c.InvoiceEvents(ctx, time.Second, time.Time{}, 10)
	},
	"GET /payment-api/v1/invoices":      func(ctx context.Context, c *yagna.Client) (any, error) { return c.Invoices(ctx, time.Time{}, 0) },
	"GET /payment-api/v1/invoices/{id}": func(ctx context.Context, c *yagna.Client) (any, error) { return c.GetInvoice(ctx, "inv") },
	"POST /payment-api/v1/invoices/{id}/accept": func(ctx context.Context, c *yagna.Client) (any, error) {
		return nil, c.AcceptInvoice(ctx, "inv", yagna.Acceptance{TotalAmountAccepted: "1", AllocationID: "al"}, time.Second)
	},

	"GET /me":          func(ctx context.Context, c *yagna.Client) (any, error) { return c.Me(ctx) },
	"GET /version/get": func(ctx context.Context, c *yagna.Client) (any, error) { return c.Version(ctx) },
}

// wireEndpoint maps the golden of provider/ (a debit note as the requestor reads it) to its endpoint.
func wireEndpoint(g golden) string {
	if strings.HasPrefix(g.Endpoint, "provider -> POST /payment-api/v1/debitNotes") {
		return "GET /payment-api/v1/debitNotes/{id}"
	}
	return g.Endpoint
}

// TestWireGoldens replays every golden answer of yagna to the client method
// that reads its endpoint: a success decodes into the client's type, keeping
// every member the golden has (a member the type drops is a finding), and an
// error is an *APIError of that status (a VPN's 403 reported as not found).
func TestWireGoldens(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(wireDir, "*", "*.json"))
	if len(files) == 0 {
		t.Skipf("no goldens under %s (the corpus is committed on main)", wireDir)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var g golden
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		call, ok := wireCalls[wireEndpoint(g)]
		if !ok || g.Status < 200 || g.Status == 101 {
			continue // an endpoint the client does not call, or not an HTTP answer (exeunit/provider rules)
		}
		t.Run(strings.TrimPrefix(f, wireDir+"/"), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if g.ContentType != nil {
					w.Header().Set("Content-Type", *g.ContentType)
				}
				w.WriteHeader(g.Status)
				switch {
				case g.BodyText != nil:
					_, _ = w.Write([]byte(*g.BodyText))
				case g.ContentType != nil && len(g.Body) > 0:
					_, _ = w.Write(g.Body) // "null" included: yagna's web::Json(())
				}
			}))
			defer srv.Close()
			c := yagna.New(srv.URL, "k")
			c.Retries = -1
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := call(ctx, c)
			if g.Status >= 300 {
				// The client reports a VPN's 403 and the 500 of an unknown activity as not found.
				want := g.Status
				if g.Status == http.StatusForbidden && strings.HasPrefix(g.Endpoint, "GET /net-api/v1/net/{id}") ||
					g.Status == http.StatusInternalServerError && strings.Contains(string(g.Body), "Not found: agreement id for activity") {
					want = http.StatusNotFound
				}
				if yagna.StatusOf(err) != want {
					t.Errorf("%s (%s): error %v, want status %d", g.Endpoint, g.Case, err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s (%s): %v", g.Endpoint, g.Case, err)
			}
			if got == nil || len(g.Body) == 0 || string(g.Body) == "null" {
				return
			}
			var want any
			_ = json.Unmarshal(g.Body, &want)
			b, _ := json.Marshal(got)
			var have any
			_ = json.Unmarshal(b, &have)
			if missing := missingPaths(want, have, "", g.Optional); len(missing) > 0 {
				t.Errorf("%s (%s): the client's type drops %s", g.Endpoint, g.Case, strings.Join(missing, ", "))
			}
		})
	}
}

// missingPaths lists the members of want (JSON pointers, arrays by their
// first element) that have does not have, except optional ones; an object
// member that is a free-form map (properties) is compared too.
func missingPaths(want, have any, at string, optional []string) []string {
	var out []string
	switch w := want.(type) {
	case map[string]any:
		h, _ := have.(map[string]any)
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := at + "/" + k
			hv, ok := h[k]
			if !ok {
				if !isOptional(p, optional) && w[k] != nil {
					out = append(out, p)
				}
				continue
			}
			out = append(out, missingPaths(w[k], hv, p, optional)...)
		}
	case []any:
		h, _ := have.([]any)
		if len(w) > 0 && len(h) > 0 {
			out = append(out, missingPaths(w[0], h[0], at+"/0", optional)...)
		}
	}
	return out
}

func isOptional(p string, optional []string) bool {
	for _, o := range optional {
		if o == p || strings.HasSuffix(p, o) || strings.ReplaceAll(o, "*", "0") == p {
			return true
		}
	}
	return false
}
