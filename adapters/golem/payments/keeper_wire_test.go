package payments

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestKeeperAcceptsProviderDebitNotes: a provider sends usageCounterVector as
// an array of numbers (agent/provider/src/payments/payments.rs send_debit_note:
// json!(cost_info.usage)). The old DebitNote typed it as an object, so the
// listing failed to decode and the keeper accepted no note at all (run
// against the old types.go: "listing debit notes: ... cannot unmarshal array").
func TestKeeperAcceptsProviderDebitNotes(t *testing.T) {
	const note = `[{"debitNoteId":"dn1","issuerId":"0xp","recipientId":"0xr","payeeAddr":"0xp","payerAddr":"0xr",
		"paymentPlatform":"erc20-hoodi-tglm","timestamp":"2026-11-28T01:00:00Z","agreementId":"ag1","activityId":"act1",
		"totalAmountDue":"0.0123","usageCounterVector":[12.5,30.0],"paymentDueDate":"2026-11-28T01:02:00Z","status":"RECEIVED"}]`
	var mu sync.Mutex
	var accepted []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == yagna.PaymentPrefix+"/debitNotes":
			_, _ = io.WriteString(w, note)
		case r.URL.Path == yagna.PaymentPrefix+"/invoices":
			_, _ = io.WriteString(w, `[]`)
		case strings.HasPrefix(r.URL.Path, yagna.MarketPrefix+"/agreements/ag1"):
			_, _ = io.WriteString(w, `{"agreementId":"ag1","demand":{"properties":{"`+AppProperty+`":"app1"},"constraints":"()","demandId":"d","requestorId":"0xr","timestamp":"2026-11-28T01:00:00Z"},
				"offer":{"properties":{},"constraints":"()","offerId":"o","providerId":"0xp","timestamp":"2026-11-28T01:00:00Z"},"validTo":"2026-11-28T02:00:00Z","state":"Approved","timestamp":"2026-11-28T01:00:00Z"}`)
		case r.URL.Path == yagna.PaymentPrefix+"/debitNotes/dn1/accept":
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			accepted = append(accepted, string(b))
			mu.Unlock()
			_, _ = io.WriteString(w, "null")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	k := &Keeper{YC: yagna.New(srv.URL, "k"), App: "app1", Allocation: "alloc1", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := k.Sweep(context.Background()); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(accepted) != 1 || !strings.Contains(accepted[0], `"totalAmountAccepted":"0.0123"`) || !strings.Contains(accepted[0], `"allocationId":"alloc1"`) {
		t.Errorf("accepted = %q, want dn1 accepted for 0.0123 against alloc1", accepted)
	}
	notes, err := k.YC.DebitNotes(context.Background(), time.Time{}, 0)
	if err != nil || len(notes) != 1 || len(notes[0].UsageCounterVector) != 2 || notes[0].UsageCounterVector[1] != 30 {
		t.Errorf("DebitNotes = %+v, %v; want the usage vector [12.5 30]", notes, err)
	}
}
