package service

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
)

// currency is what Golem rentals are paid in.
const currency = "GLM"

// reportsSpend says the state answers carry what the rentals cost
// (protocol.Spent), which gcompose cost and the reconciler's budget sum.
func reportsSpend(ext *protocol.InitExt) *protocol.InitExt {
	ext.Spend = true
	return ext
}

// agreementsOf are the agreements the identity records: the one the
// service runs on and those of the rentals it replaced (Identity.Agreements
// keeps them across rebuilds). The state is where this history lives: it
// outlives yagna's, which forgets an agreement 90 days after it ends.
func agreementsOf(id Identity) map[string]bool {
	out := map[string]bool{}
	for _, a := range append([]string{id.AgreementID}, id.Agreements...) {
		if a != "" {
			out[a] = true
		}
	}
	return out
}

// spentOf asks yagna what the service's agreements have cost: nil when it
// has none. yagna cannot list the notes and invoices of given agreements,
// only all of the node's (GET /debitNotes, /invoices): those of other
// resources and applications on the same node are read and left out. A
// listing that fails leaves the figure out (the state keeps the last one)
// rather than failing the state call a deploy waits on.
func spentOf(ctx context.Context, yc *yagna.Client, id Identity, running bool) *protocol.Spent {
	mine := agreementsOf(id)
	if len(mine) == 0 {
		return nil
	}
	notes, err := yc.DebitNotes(ctx, time.Time{}, 0)
	if err == nil {
		var invoices []yagna.Invoice
		if invoices, err = yc.Invoices(ctx, time.Time{}, 0); err == nil {
			var sp *protocol.Spent
			if sp, err = tally(mine, notes, invoices); err == nil {
				if running && id.Price != nil && id.Price.GLMPerHour > 0 {
					// The shortest decimal that reads back as the agreed
					// float: 1.08, not its binary 1.080000000000000071.
					sp.PerHour = strconv.FormatFloat(id.Price.GLMPerHour, 'f', -1, 64)
				}
				return sp
			}
		}
	}
	slog.Warn("reading what the service's agreements cost: left out of this answer", "err", err)
	return nil
}

// tally adds up what was accepted for the agreements of mine: each one's
// invoice once accepted (it covers the whole agreement), else the last
// accepted debit note of each of its activities (a note's amount is the
// activity's total so far). Due is what the latest note or invoice asks
// beyond that.
func tally(mine map[string]bool, notes []yagna.DebitNote, invoices []yagna.Invoice) (*protocol.Spent, error) {
	type activity struct{ accepted, asked *big.Rat }
	acts := map[string]map[string]*activity{} // agreement -> activity -> amounts
	for _, n := range notes {
		if !mine[n.AgreementID] {
			continue
		}
		v, err := rat(n.TotalAmountDue)
		if err != nil {
			return nil, fmt.Errorf("debit note %s: %w", n.DebitNoteID, err)
		}
		if acts[n.AgreementID] == nil {
			acts[n.AgreementID] = map[string]*activity{}
		}
		a := acts[n.AgreementID][n.ActivityID]
		if a == nil {
			a = &activity{accepted: new(big.Rat), asked: new(big.Rat)}
			acts[n.AgreementID][n.ActivityID] = a
		}
		if v.Cmp(a.asked) > 0 {
			a.asked = v
		}
		if (n.Status == yagna.StatusAccepted || n.Status == yagna.StatusSettled) && v.Cmp(a.accepted) > 0 {
			a.accepted = v
		}
	}
	type bill struct{ accepted, due *big.Rat }
	bills := map[string]*bill{}
	for ag := range mine {
		b := &bill{accepted: new(big.Rat), due: new(big.Rat)}
		for _, a := range acts[ag] {
			b.accepted.Add(b.accepted, a.accepted)
			b.due.Add(b.due, new(big.Rat).Sub(a.asked, a.accepted))
		}
		bills[ag] = b
	}
	for _, inv := range invoices {
		b := bills[inv.AgreementID]
		if b == nil {
			continue
		}
		v, err := rat(inv.Amount)
		if err != nil {
			return nil, fmt.Errorf("invoice %s: %w", inv.InvoiceID, err)
		}
		switch inv.Status {
		case yagna.StatusAccepted, yagna.StatusSettled:
			b.accepted, b.due = v, new(big.Rat)
		case yagna.StatusReceived:
			if d := new(big.Rat).Sub(v, b.accepted); d.Sign() > 0 {
				b.due = d
			}
		}
	}
	accepted, due := new(big.Rat), new(big.Rat)
	for _, b := range bills {
		accepted.Add(accepted, b.accepted)
		due.Add(due, b.due)
	}
	sp := &protocol.Spent{Amount: decimal(accepted), Currency: currency, Items: len(mine),
		Covers: strconv.Itoa(len(mine)) + " agreement(s): accepted invoices, else the last accepted debit notes"}
	if due.Sign() > 0 {
		sp.Due = decimal(due)
	}
	return sp, nil
}

func rat(s string) (*big.Rat, error) {
	v, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return nil, fmt.Errorf("amount %q is not a number", s)
	}
	return v, nil
}

// decimal writes v as the protocol's decimal string, to the wei (18
// decimals, GLM's smallest unit), without trailing zeros.
func decimal(v *big.Rat) string {
	s := strings.TrimRight(v.FloatString(18), "0")
	return strings.TrimSuffix(s, ".")
}
