package main

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/reconcile"
	"github.com/gcompose/gcompose/core/state"
)

func costCommand() *cli.Command {
	return &cli.Command{
		Name:      "cost",
		Usage:     "show what each service has cost so far: the debit notes and invoices accepted for its agreements",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Description: `Counts the agreements the state records for each service: the one it runs on and those of the
   rentals it replaced. For each it asks yagna ($YAGNA_API_URL, $YAGNA_APPKEY) for the invoice accepted
   or, while there is none, the last debit note accepted for each of its activities; other
   applications' notes and invoices on the same yagna are not counted.
   ACCEPTED is what was accepted so far, DUE what providers ask and was not accepted yet, GLM/H the
   agreed price of what runs now.`,
		Flags: append(append(descriptorFlags(), stateFlags()...),
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"}),
		Action: runCost,
	}
}

func runCost(c *cli.Context) error {
	name, doc, err := loadAppState(c)
	if err != nil {
		return err
	}
	var yc *yagna.Client
	if len(ledgerOf(doc)) > 0 {
		if yc, err = yagna.FromEnvFunc(os.Getenv); err != nil {
			return withCode(exitError, fmt.Errorf("asking yagna what %s cost: %w", name, err))
		}
	}
	rep, err := golemCost(c.Context, yc, name, doc)
	if err != nil {
		return withCode(exitError, err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, rep)
	}
	if len(rep.Resources) == 0 {
		fmt.Fprintf(c.App.Writer, "%s: the state records no agreement: nothing rented on Golem\n", name)
		return nil
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tAGREEMENTS\tACCEPTED (GLM)\tDUE (GLM)\tGLM/H")
	row := func(r costRow) {
		perHour := "-"
		if r.PerHour > 0 {
			perHour = amount(r.PerHour)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Resource, r.Agreements, amount(r.Accepted), amount(r.Due), perHour)
	}
	for _, r := range rep.Resources {
		row(r)
	}
	row(rep.Total)
	return tw.Flush()
}

// costReport is what gcompose cost prints.
type costReport struct {
	App       string    `json:"app"`
	Lineage   string    `json:"lineage"`
	Currency  string    `json:"currency"`
	Resources []costRow `json:"resources"`
	Total     costRow   `json:"total"`
}

type costRow struct {
	Resource   string  `json:"resource"`
	Agreements int     `json:"agreements"`
	Accepted   float64 `json:"accepted"`
	Due        float64 `json:"due"`
	// PerHour is the agreed price of the rental that runs now (the state's).
	PerHour float64 `json:"per_hour"`
}

// amount prints GLM to the nano, without trailing zeros.
func amount(f float64) string {
	s := strings.TrimRight(fmt.Sprintf("%.9f", f), "0")
	return strings.TrimSuffix(s, ".")
}

// ledgerOf maps every agreement the state records to the resource it was
// made for: the one each Golem service runs on and those of the rentals it
// replaced (golem-service keeps them in its identity, across rebuilds). The
// state is where this history lives: it is the application's own, and
// outlives yagna's, which forgets an agreement 90 days after it ends.
func ledgerOf(doc *state.Document) map[string]string {
	out := map[string]string{}
	for name, r := range doc.Resources {
		ids := []any{r.Identity["agreement_id"]}
		switch h := r.Identity["agreements"].(type) {
		case []any:
			ids = append(ids, h...)
		case []string:
			for _, id := range h {
				ids = append(ids, id)
			}
		}
		for _, v := range ids {
			if id, _ := v.(string); id != "" {
				out[id] = name
			}
		}
	}
	return out
}

// golemCost asks yagna what the agreements the state records have cost.
// yagna cannot list the notes and invoices of given agreements, only all of
// the node's (GET /debitNotes, /invoices): those of other applications on
// the same node are read and left out.
func golemCost(ctx context.Context, yc *yagna.Client, app string, doc *state.Document) (*costReport, error) {
	mine := ledgerOf(doc)
	var notes []yagna.DebitNote
	var invoices []yagna.Invoice
	if len(mine) > 0 {
		var err error
		if notes, err = yc.DebitNotes(ctx, time.Time{}, 0); err != nil {
			return nil, fmt.Errorf("listing debit notes: %w", err)
		}
		if invoices, err = yc.Invoices(ctx, time.Time{}, 0); err != nil {
			return nil, fmt.Errorf("listing invoices: %w", err)
		}
	}
	return tally(app, doc, mine, notes, invoices)
}

// tally adds up, per resource, what was accepted for each agreement of
// mine (agreement -> resource): its
// invoice once accepted (it covers the whole agreement), else the last
// accepted debit note of each of its activities (a note's amount is the
// activity's total so far). Due is what the latest note or invoice asks
// beyond that.
func tally(app string, doc *state.Document, mine map[string]string, notes []yagna.DebitNote, invoices []yagna.Invoice) (*costReport, error) {
	rep := &costReport{App: app, Lineage: doc.Lineage, Currency: reconcile.Currency, Resources: []costRow{}, Total: costRow{Resource: "total"}}
	type activity struct{ accepted, asked *big.Rat }
	acts := map[string]map[string]*activity{} // agreement -> activity -> amounts
	for _, n := range notes {
		if _, ok := mine[n.AgreementID]; !ok {
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
	bills := map[string]*bill{} // agreement
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
	rows := map[string]*costRow{}
	for ag, res := range mine {
		r := rows[res]
		if r == nil {
			r = &costRow{Resource: res}
			rows[res] = r
		}
		r.Agreements++
		acc, _ := bills[ag].accepted.Float64()
		due, _ := bills[ag].due.Float64()
		r.Accepted += acc
		r.Due += due
	}
	for name, res := range doc.Resources {
		if r := rows[name]; r != nil && res.Status == state.StatusActive {
			r.PerHour = agreedPerHour(res)
		}
	}
	for _, r := range rows {
		rep.Resources = append(rep.Resources, *r)
		rep.Total.Agreements += r.Agreements
		rep.Total.Accepted += r.Accepted
		rep.Total.Due += r.Due
		rep.Total.PerHour += r.PerHour
	}
	sort.Slice(rep.Resources, func(i, j int) bool { return rep.Resources[i].Resource < rep.Resources[j].Resource })
	return rep, nil
}

// agreedPerHour is the agreed price a Golem service records in its
// identity (price.glm_per_hour), 0 when it has none.
func agreedPerHour(r *state.Resource) float64 {
	p, _ := r.Identity["price"].(map[string]any)
	f, _ := p["glm_per_hour"].(float64)
	return f
}

func rat(s string) (*big.Rat, error) {
	v, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return nil, fmt.Errorf("amount %q is not a number", s)
	}
	return v, nil
}

// golemSpender is what the reconciler reads spending with: the same
// report as gcompose cost.
type golemSpender struct {
	yc  *yagna.Client
	app string
}

func (g golemSpender) Spent(ctx context.Context, doc *state.Document) (*reconcile.Spend, error) {
	rep, err := golemCost(ctx, g.yc, g.app, doc)
	if err != nil {
		return nil, err
	}
	sp := &reconcile.Spend{Total: rep.Total.Accepted, Due: rep.Total.Due, ByResource: map[string]float64{}}
	for _, r := range rep.Resources {
		sp.ByResource[r.Resource] = r.Accepted
	}
	return sp, nil
}

// spenderFromEnv is the Golem spender when yagna is configured, nil
// otherwise (an application without Golem services has nothing to pay).
func spenderFromEnv(app string) (reconcile.Spender, error) {
	if os.Getenv("YAGNA_APPKEY") == "" {
		return nil, nil
	}
	yc, err := yagna.FromEnvFunc(os.Getenv)
	if err != nil {
		return nil, err
	}
	return golemSpender{yc: yc, app: app}, nil
}
