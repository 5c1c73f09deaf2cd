package payments

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"sort"
	"sync"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// AppProperty is the demand property that tags an agreement with its app:
// the keeper of app X accepts only the debit notes and invoices of
// agreements whose demand carries gcompose.app=X.
const AppProperty = tag.App

// Keeper accepts the debit notes and invoices of one app's agreements
// against its allocation. Run it in one goroutine; Sweep and SettleFinal
// may be called without Run.
type Keeper struct {
	YC         *yagna.Client
	App        string
	Allocation string
	Log        *slog.Logger
	// TTL is how far ahead the keeper keeps the allocation's timeout (0:
	// it leaves the timeout alone).
	TTL time.Duration
	// Rescan is how often Run sweeps the notes and invoices still waiting
	// (those new since the last sweep, Sweep), to catch what an event poll
	// missed; 0 means DefaultRescan.
	Rescan time.Duration
	// RetryBackoff is the pause before the first retry of a failed accept,
	// doubled each time up to MaxRetryBackoff; 0 means DefaultRetryBackoff.
	RetryBackoff time.Duration

	mu     sync.Mutex
	ours   map[string]bool // agreement id -> belongs to the app
	failed map[string]*failedAccept
	// notesSeen, invsSeen are the newest debit note and invoice a sweep
	// has read (zero before the first).
	notesSeen, invsSeen time.Time
}

// A provider ends an agreement whose debit note stays unaccepted past its
// accept timeout (agent/provider/src/payments/payments.rs, DeadlineElapsed →
// BreakReason::DebitNotesDeadline; 240 s by default, 120 s in tests of
// agent/provider/src/market/negotiator/builtin/expiration.rs). A failed
// accept is therefore retried well within it, and every note still waiting
// is looked for again every DefaultRescan: the event cursor has moved past a
// note whose accept failed.
const (
	DefaultRescan       = 30 * time.Second
	DefaultRetryBackoff = time.Second
	MaxRetryBackoff     = 30 * time.Second
)

// failedAccept is a debit note or invoice whose accept failed: retried at
// next.
type failedAccept struct {
	note     *yagna.DebitNote
	invoice  *yagna.Invoice
	attempts int
	next     time.Time
}

// belongs tells whether an agreement is the app's (cached).
func (k *Keeper) belongs(ctx context.Context, agreementID string) (bool, error) {
	k.mu.Lock()
	v, ok := k.ours[agreementID]
	k.mu.Unlock()
	if ok {
		return v, nil
	}
	a, err := k.YC.GetAgreement(ctx, agreementID)
	if err != nil {
		return false, fmt.Errorf("agreement %s: %w", agreementID, err)
	}
	app, _ := a.Demand.Properties[AppProperty].(string)
	mine := app == k.App
	k.mu.Lock()
	if k.ours == nil {
		k.ours = map[string]bool{}
	}
	k.ours[agreementID] = mine
	k.mu.Unlock()
	return mine, nil
}

// ScanPage is how many debit notes or invoices one list call of a sweep
// reads (maxItems): a node's history grows with every agreement it ever
// made, and one answer must stay far below the client's size cap. yagna
// takes any u32 (ya-client model/src/payment/params.rs FilterParams); the
// spec declares at most 100.
const ScanPage = 100

// RescanLookback is how far before the newest note or invoice a sweep has
// seen the next one starts: what arrives late (a provider that was cut off
// sends its notes when it is back) is dated when it was issued. Older ones
// whose accept failed are retried on their own (failed).
const RescanLookback = time.Hour

// Sweep accepts every debit note and invoice of the app still waiting
// (received while the keeper was down, missed by an event poll, or at the
// end of the app). A failed accept is remembered for retry. The first
// sweep reads the node's whole history, in pages of ScanPage; each later
// one only what is dated from RescanLookback before the newest it has seen
// (yagna lists them oldest first after afterTimestamp, at most maxItems:
// core/payment/src/dao/debit_note.rs and invoice.rs get_for_node_id).
func (k *Keeper) Sweep(ctx context.Context) error {
	k.mu.Lock()
	notesFrom, invsFrom := k.notesSeen, k.invsSeen
	k.mu.Unlock()
	newest, err := scan(ctx, lookback(notesFrom), k.YC.DebitNotes, func(n yagna.DebitNote) time.Time { return n.Timestamp }, func(n yagna.DebitNote) {
		if n.Status == yagna.StatusReceived {
			k.handleNote(ctx, n)
		}
	})
	k.mu.Lock()
	k.notesSeen = later(k.notesSeen, newest)
	k.mu.Unlock()
	if err != nil {
		return fmt.Errorf("listing debit notes: %w", err)
	}
	newest, err = scan(ctx, lookback(invsFrom), k.YC.Invoices, func(inv yagna.Invoice) time.Time { return inv.Timestamp }, func(inv yagna.Invoice) {
		if inv.Status == yagna.StatusReceived {
			k.handleInvoice(ctx, inv)
		}
	})
	k.mu.Lock()
	k.invsSeen = later(k.invsSeen, newest)
	k.mu.Unlock()
	if err != nil {
		return fmt.Errorf("listing invoices: %w", err)
	}
	return nil
}

// lookback is where a sweep starts: nothing seen yet, the beginning.
func lookback(seen time.Time) time.Time {
	if seen.IsZero() {
		return seen
	}
	return seen.Add(-RescanLookback)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// scan reads a list page by page from after (strictly), handing each item
// to each, and returns the newest timestamp read. A page ends at its last
// item's timestamp; the next starts a microsecond before it, so that items
// sharing that timestamp are not lost between pages (they are read twice,
// which an accept takes: yagna answers 200 to an accepted note).
func scan[T any](ctx context.Context, after time.Time, list func(context.Context, time.Time, int) ([]T, error), stamp func(T) time.Time, each func(T)) (time.Time, error) {
	newest := time.Time{}
	for {
		page, err := list(ctx, after, ScanPage)
		if err != nil {
			return newest, err
		}
		for _, v := range page {
			each(v)
			newest = later(newest, stamp(v))
		}
		if len(page) < ScanPage {
			return newest, nil
		}
		next := stamp(page[len(page)-1]).Add(-time.Microsecond)
		if !next.After(after) {
			next = stamp(page[len(page)-1])
		}
		if !next.After(after) {
			return newest, fmt.Errorf("more than %d items dated %s: cannot page past them", ScanPage, after.Format(time.RFC3339Nano))
		}
		after = next
	}
}

// handleNote accepts a note, or remembers it for retry.
func (k *Keeper) handleNote(ctx context.Context, n yagna.DebitNote) {
	if err := k.acceptNote(ctx, n); err != nil {
		k.retryLater(n.DebitNoteID, &failedAccept{note: &n}, err)
		return
	}
	k.forget(n.DebitNoteID)
}

// handleInvoice accepts an invoice, or remembers it for retry.
func (k *Keeper) handleInvoice(ctx context.Context, inv yagna.Invoice) {
	if err := k.acceptInvoice(ctx, inv); err != nil {
		k.retryLater(inv.InvoiceID, &failedAccept{invoice: &inv}, err)
		return
	}
	k.forget(inv.InvoiceID)
}

func (k *Keeper) retryLater(id string, f *failedAccept, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.failed == nil {
		k.failed = map[string]*failedAccept{}
	}
	if prev, ok := k.failed[id]; ok {
		f.attempts = prev.attempts
	}
	f.attempts++
	base := k.RetryBackoff
	if base <= 0 {
		base = DefaultRetryBackoff
	}
	d := base << min(f.attempts-1, 16)
	d = min(d, MaxRetryBackoff)
	f.next = time.Now().Add(d)
	k.failed[id] = f
	k.Log.Warn("accept failed, retrying", "id", id, "attempt", f.attempts, "in", d, "err", err)
}

func (k *Keeper) forget(id string) {
	k.mu.Lock()
	delete(k.failed, id)
	k.mu.Unlock()
}

// retryDue retries the failed accepts whose time has come.
func (k *Keeper) retryDue(ctx context.Context) {
	now := time.Now()
	k.mu.Lock()
	var due []*failedAccept
	for _, f := range k.failed {
		if !now.Before(f.next) {
			due = append(due, f)
		}
	}
	k.mu.Unlock()
	for _, f := range due {
		switch {
		case f.note != nil:
			// It may have been accepted meanwhile (a sweep, yagna's own retry): read it again.
			n, err := k.YC.GetDebitNote(ctx, f.note.DebitNoteID)
			switch {
			case yagna.IsNotFound(err):
				k.forget(f.note.DebitNoteID)
			case err != nil:
				k.retryLater(f.note.DebitNoteID, f, err)
			case n.Status != yagna.StatusReceived:
				k.forget(n.DebitNoteID)
			default:
				k.handleNote(ctx, n)
			}
		case f.invoice != nil:
			inv, err := k.YC.GetInvoice(ctx, f.invoice.InvoiceID)
			switch {
			case yagna.IsNotFound(err):
				k.forget(f.invoice.InvoiceID)
			case err != nil:
				k.retryLater(f.invoice.InvoiceID, f, err)
			case inv.Status != yagna.StatusReceived:
				k.forget(inv.InvoiceID)
			default:
				k.handleInvoice(ctx, inv)
			}
		}
	}
}

// Pending is how many accepts wait for a retry.
func (k *Keeper) Pending() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.failed)
}

// withinBudget checks that accepting amount leaves the allocation within
// its budget (yagna refuses it otherwise; the check gives a clear log).
func (k *Keeper) withinBudget(ctx context.Context, amount string) error {
	a, err := k.YC.GetAllocation(ctx, k.Allocation)
	if err != nil {
		return fmt.Errorf("allocation %s: %w", k.Allocation, err)
	}
	rem, ok1 := new(big.Rat).SetString(a.RemainingAmount)
	amt, ok2 := new(big.Rat).SetString(amount)
	if ok1 && ok2 && amt.Cmp(rem) > 0 {
		return fmt.Errorf("amount %s exceeds what allocation %s has left (%s)", amount, k.Allocation, a.RemainingAmount)
	}
	return nil
}

func (k *Keeper) acceptNote(ctx context.Context, n yagna.DebitNote) error {
	mine, err := k.belongs(ctx, n.AgreementID)
	if err != nil || !mine {
		return err
	}
	err = k.YC.AcceptDebitNote(ctx, n.DebitNoteID, yagna.DebitNoteAcceptance{TotalAmountAccepted: n.TotalAmountDue, AllocationID: k.Allocation}, 10*time.Second)
	if err != nil {
		if berr := k.withinBudget(ctx, n.TotalAmountDue); berr != nil {
			return fmt.Errorf("debit note %s: %w (%v)", n.DebitNoteID, berr, err)
		}
		return fmt.Errorf("accepting debit note %s: %w", n.DebitNoteID, err)
	}
	k.Log.Info("debit note accepted", "debitNote", n.DebitNoteID, "agreement", n.AgreementID, "totalAmountDue", n.TotalAmountDue)
	return nil
}

func (k *Keeper) acceptInvoice(ctx context.Context, inv yagna.Invoice) error {
	mine, err := k.belongs(ctx, inv.AgreementID)
	if err != nil || !mine {
		return err
	}
	err = k.YC.AcceptInvoice(ctx, inv.InvoiceID, yagna.Acceptance{TotalAmountAccepted: inv.Amount, AllocationID: k.Allocation}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("accepting invoice %s: %w", inv.InvoiceID, err)
	}
	k.Log.Info("invoice accepted", "invoice", inv.InvoiceID, "agreement", inv.AgreementID, "amount", inv.Amount)
	return nil
}

// Run accepts debit notes and invoices as their events arrive, retries the
// accepts that failed, and sweeps again every Rescan, until ctx ends. A
// failing poll is retried after a pause.
func (k *Keeper) Run(ctx context.Context, ready func()) error {
	if _, err := k.YC.GetAllocation(ctx, k.Allocation); err != nil {
		return fmt.Errorf("allocation %s: %w", k.Allocation, err)
	}
	since := time.Now().Add(-time.Second)
	if err := k.Sweep(ctx); err != nil {
		return err
	}
	ready()
	var wg sync.WaitGroup
	if k.TTL > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.extendLoop(ctx)
		}()
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		k.loop(ctx, "debit notes", since, func(after time.Time) (time.Time, error) {
			evs, err := k.YC.DebitNoteEvents(ctx, 5*time.Second, after, 50)
			for _, ev := range evs {
				after = ev.EventDate
				if ev.EventType != yagna.EventDebitNoteReceived {
					continue
				}
				n, err := k.YC.GetDebitNote(ctx, ev.DebitNoteID)
				if err != nil {
					k.Log.Warn("reading debit note (the next sweep finds it)", "debitNote", ev.DebitNoteID, "err", err)
					continue
				}
				k.handleNote(ctx, n)
			}
			return after, err
		})
	}()
	go func() {
		defer wg.Done()
		k.loop(ctx, "invoices", since, func(after time.Time) (time.Time, error) {
			evs, err := k.YC.InvoiceEvents(ctx, 5*time.Second, after, 50)
			for _, ev := range evs {
				after = ev.EventDate
				if ev.EventType != yagna.EventInvoiceReceived {
					continue
				}
				inv, err := k.YC.GetInvoice(ctx, ev.InvoiceID)
				if err != nil {
					k.Log.Warn("reading invoice (the next sweep finds it)", "invoice", ev.InvoiceID, "err", err)
					continue
				}
				k.handleInvoice(ctx, inv)
			}
			return after, err
		})
	}()
	go func() {
		defer wg.Done()
		k.retries(ctx)
	}()
	wg.Wait()
	return nil
}

// retries runs the failed accepts again when due, and a full sweep every
// Rescan.
func (k *Keeper) retries(ctx context.Context) {
	rescan := k.Rescan
	if rescan <= 0 {
		rescan = DefaultRescan
	}
	tick := time.NewTicker(min(rescan, 250*time.Millisecond))
	defer tick.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			k.retryDue(ctx)
			if now.Sub(lastSweep) >= rescan {
				lastSweep = now
				if err := k.Sweep(ctx); err != nil && ctx.Err() == nil {
					k.Log.Warn("periodic sweep of debit notes and invoices", "err", err)
				}
			}
		}
	}
}

func (k *Keeper) loop(ctx context.Context, what string, after time.Time, poll func(time.Time) (time.Time, error)) {
	for ctx.Err() == nil {
		next, err := poll(after)
		after = next
		if err != nil && !yagna.IsTimeout(err) && ctx.Err() == nil {
			k.Log.Warn("polling "+what, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// MainKeep is the keeper container's main: args after "keep", secrets on
// stdin, the ready line on stdout, logs on stderr.
func MainKeep(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fs := flag.NewFlagSet(KeepArg, flag.ContinueOnError)
	fs.SetOutput(stderr)
	app := fs.String("app", "", "application name")
	alloc := fs.String("allocation", "", "allocation id")
	ttl := fs.Duration("allocation-timeout", 0, "keep the allocation's timeout this far ahead (0: leave it)")
	if err := fs.Parse(args); err != nil || *app == "" || *alloc == "" {
		fmt.Fprintln(stderr, "usage: keep --app APP --allocation ID [--allocation-timeout 24h] (secrets as JSON on stdin)")
		return 2
	}
	yc, err := longlived.Connect(stdin, log) // it logs what failed
	if err != nil {
		return 1
	}
	k := &Keeper{YC: yc, App: *app, Allocation: *alloc, TTL: *ttl, Log: log.With("app", *app, "allocation", *alloc)}
	err = k.Run(ctx, func() {
		fmt.Fprintln(stdout, longlived.ReadyLine)
		log.Info("payments keeper running")
	})
	if err != nil && ctx.Err() == nil {
		log.Error("payments keeper", "err", err)
		return 1
	}
	return 0
}

// DefaultFinalInvoiceWait bounds how long destroy waits for the invoices of
// the app's ended agreements before it releases the allocation: yapapi
// waits 30 s for the invoices of unpaid agreements at shutdown
// (yapapi/engine.py _shutdown), and an invoice that comes after the release
// can no longer be accepted (yagna answers 410, core/payment/src/api/
// invoices.rs).
const DefaultFinalInvoiceWait = 30 * time.Second

// SettleFinal accepts what is still due at the end of the app: every note
// and invoice waiting (Sweep), then, for up to wait, the invoices of the
// app's agreements approved since since that have ended without one (a
// provider sends the invoice once it has closed the agreement). It returns
// the agreements whose invoice did not come in time, or whose invoice could
// not be accepted.
func (k *Keeper) SettleFinal(ctx context.Context, since time.Time, wait time.Duration) ([]string, error) {
	if err := k.Sweep(ctx); err != nil {
		return nil, err
	}
	ended, err := k.endedAgreements(ctx, since)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		invs, err := k.YC.Invoices(ctx, since.Add(-time.Minute), 0)
		if err != nil {
			return nil, fmt.Errorf("listing invoices: %w", err)
		}
		var unpaid []string
		paid := map[string]bool{}
		for _, inv := range invs {
			if !ended[inv.AgreementID] {
				continue
			}
			if inv.Status == yagna.StatusReceived {
				if err := k.acceptInvoice(ctx, inv); err != nil {
					k.Log.Warn("final invoice not accepted", "invoice", inv.InvoiceID, "err", err)
					continue
				}
			}
			paid[inv.AgreementID] = true
		}
		for a := range ended {
			if !paid[a] {
				unpaid = append(unpaid, a)
			}
		}
		sort.Strings(unpaid)
		if len(unpaid) == 0 || !time.Now().Before(deadline) {
			return unpaid, nil
		}
		select {
		case <-ctx.Done():
			return unpaid, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// endedAgreements are the app's agreements approved since since that are
// now Terminated: each owes an invoice.
func (k *Keeper) endedAgreements(ctx context.Context, since time.Time) (map[string]bool, error) {
	ended := map[string]bool{}
	after := since.Add(-time.Minute)
	for {
		// The app's agreements carry its appSessionId (tag.SessionID); the
		// demand's app tag is checked too (belongs).
		evs, err := k.YC.AgreementEvents(ctx, 0, after, 100, tag.SessionID(k.App))
		if err != nil && !yagna.IsTimeout(err) {
			return nil, fmt.Errorf("agreement events: %w", err)
		}
		for _, ev := range evs {
			after = ev.EventDate
			if ev.EventType != yagna.EventAgreementApproved {
				continue
			}
			mine, err := k.belongs(ctx, ev.AgreementID)
			if err != nil {
				if yagna.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			if !mine {
				continue
			}
			a, err := k.YC.GetAgreement(ctx, ev.AgreementID)
			if err != nil {
				return nil, fmt.Errorf("agreement %s: %w", ev.AgreementID, err)
			}
			if a.State == yagna.AgreementTerminated {
				ended[a.AgreementID] = true
			}
		}
		if len(evs) < 100 {
			return ended, nil
		}
	}
}
