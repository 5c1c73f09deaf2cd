package payments

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// AppProperty is the demand property that tags an agreement with its app:
// the keeper of app X accepts only the debit notes and invoices of
// agreements whose demand carries gcompose.app=X.
const AppProperty = "gcompose.app"

// Keeper accepts the debit notes and invoices of one app's agreements
// against its allocation. It is safe for one goroutine.
type Keeper struct {
	YC         *yagna.Client
	App        string
	Allocation string
	Log        *slog.Logger

	mu     sync.Mutex
	ours   map[string]bool // agreement id -> belongs to the app
	budget *big.Rat        // nil: unknown (ask the allocation)
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

// Sweep accepts every debit note and invoice of the app still waiting
// (received while the keeper was down, or at the end of the app).
func (k *Keeper) Sweep(ctx context.Context) error {
	notes, err := k.YC.DebitNotes(ctx, time.Time{}, 0)
	if err != nil {
		return fmt.Errorf("listing debit notes: %w", err)
	}
	for _, n := range notes {
		if n.Status == yagna.StatusReceived {
			if err := k.acceptNote(ctx, n); err != nil {
				k.Log.Warn("debit note not accepted", "debitNote", n.DebitNoteID, "err", err)
			}
		}
	}
	invs, err := k.YC.Invoices(ctx, time.Time{}, 0)
	if err != nil {
		return fmt.Errorf("listing invoices: %w", err)
	}
	for _, inv := range invs {
		if inv.Status == yagna.StatusReceived {
			if err := k.acceptInvoice(ctx, inv); err != nil {
				k.Log.Warn("invoice not accepted", "invoice", inv.InvoiceID, "err", err)
			}
		}
	}
	return nil
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

// Run accepts debit notes and invoices as their events arrive, until ctx
// ends. A failing poll is retried after a pause.
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
	wg.Add(2)
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
					k.Log.Warn("reading debit note", "debitNote", ev.DebitNoteID, "err", err)
					continue
				}
				if err := k.acceptNote(ctx, n); err != nil {
					k.Log.Warn("debit note not accepted", "debitNote", n.DebitNoteID, "err", err)
				}
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
					k.Log.Warn("reading invoice", "invoice", ev.InvoiceID, "err", err)
					continue
				}
				if err := k.acceptInvoice(ctx, inv); err != nil {
					k.Log.Warn("invoice not accepted", "invoice", inv.InvoiceID, "err", err)
				}
			}
			return after, err
		})
	}()
	wg.Wait()
	return nil
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
	if err := fs.Parse(args); err != nil || *app == "" || *alloc == "" {
		fmt.Fprintln(stderr, "usage: keep --app APP --allocation ID (secrets as JSON on stdin)")
		return 2
	}
	secrets, err := longlived.ReadSecrets(stdin)
	if err != nil {
		log.Error("no secrets", "err", err)
		return 1
	}
	yc, err := yagna.FromEnvFunc(func(k string) string { return secrets[k] })
	if err != nil {
		log.Error("yagna connection", "err", err)
		return 1
	}
	k := &Keeper{YC: yc, App: *app, Allocation: *alloc, Log: log.With("app", *app, "allocation", *alloc)}
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
