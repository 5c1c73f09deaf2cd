package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/spend"
	"github.com/gcompose/gcompose/core/stateurl"
)

// costLockWait is how long cost waits by default for the state lock that
// someone else holds: a read of what was spent does not fail because a
// deploy or a reconciler's cycle is writing (docs/cli.md#cost).
const costLockWait = 10 * time.Minute

func costCommand() *cli.Command {
	// engineFlags: the refresh that asks the adapters runs them.
	flags := append(append(descriptorFlags(), engineFlags()...),
		&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
		&cli.BoolFlag{Name: "all", Usage: "list every removed resource the ledger keeps, not only their sum"},
		&cli.BoolFlag{Name: "cached", Usage: "print what the state recorded, without asking the adapters"})
	for _, f := range flags {
		if f, ok := f.(*cli.DurationFlag); ok && f.Name == "lock-timeout" {
			f.Value = costLockWait
		}
	}
	return &cli.Command{
		Name:      "cost",
		Usage:     "show what the application has cost so far, as its adapters report it",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Description: `Asks the adapter of every deployed resource what it has cost so far (a refresh: nothing
   changes) and adds up what they report, by currency, with what the state's ledger keeps of the
   resources gcompose removed (destroyed, rebuilt anew): what an application spent outlives its
   destroy. Only adapters that report spend appear (docs/protocol.md: spent); for Golem services,
   the invoices and debit notes accepted for their agreements.
   SPENT is what was paid or accepted so far, DUE what was asked and not accepted yet, PER HOUR the
   rate of what runs now. --all lists each removed resource of the ledger; --cached, or no
   descriptor named (--app), prints what the state recorded at the last deploy without asking the
   adapters (they run with the plugs the descriptor allows).
   Asking the adapters takes the state's lock for a moment: while a deploy or a reconciler holds it,
   cost says who does and waits for it (--lock-timeout, 10m by default); --cached does not wait.`,
		Flags:  flags,
		Action: runCost,
	}
}

func runCost(c *cli.Context) error {
	name, p, err := appName(c, false)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, err := st.Load(c.Context, name)
	if err != nil {
		return withCode(exitError, err)
	}
	if doc.Serial == 0 {
		// As state pull: an application the state never held is an error
		// (a typo in --app or --state), not an application that cost nothing.
		return withCode(exitError, fmt.Errorf("no state for app %q in %s: nothing of it was deployed there (gcompose state list lists the applications it holds)", name, stateWhere(c)))
	}
	var rep *spend.Report
	live := len(doc.Resources) > 0 && !c.Bool("cached")
	if live && p == nil {
		// Asking the adapters runs them with the plugs the descriptor allows:
		// without it, what the state recorded is all there is.
		fmt.Fprintf(c.App.ErrWriter, "note: no descriptor named: this is what the state recorded for %s at its last deploy or refresh; name the descriptor (gcompose cost FILE) to ask the adapters\n", name)
		live = false
	}
	if live {
		if rep, err = askSpent(c, name, p, st); err != nil {
			return withCode(exitError, fmt.Errorf("asking the adapters what %s cost (--cached prints what the state recorded at the last deploy): %w", name, err))
		}
	} else if rep, err = spend.Of(doc, nil); err != nil {
		return withCode(exitError, err)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, rep)
	}
	return printCost(c.App.Writer, rep, c.Bool("all"))
}

// askSpent refreshes the application (its adapters' state calls, nothing
// changed) and sums what they report spent with the ledger of the state the
// refresh read.
func askSpent(c *cli.Context, name string, p *project.Project, st *project.State) (*spend.Report, error) {
	sess, err := openSessionOn(c, name, p, st.KeepOpen(), func(string) {}, func(msg string) { fmt.Fprintln(c.App.ErrWriter, msg) })
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	res, err := sess.Run(c.Context, project.Run{Mode: plan.Refresh, PlanOnly: true})
	if err != nil {
		return nil, err
	}
	if res.Outcome == nil || res.Outcome.Plan == nil || res.Outcome.Plan.Prior == nil {
		return nil, fmt.Errorf("the refresh made no plan")
	}
	return spend.Of(res.Outcome.Plan.Prior, spend.Live(res.Outcome.Plan, time.Now()))
}

// stateWhere names the state a command read, for its messages: the --state
// URL (credentials redacted), or the default directory (core/state's
// DefaultDir).
func stateWhere(c *cli.Context) string {
	url, err := stateURL(c)
	if err != nil || url == "" {
		return ".gcompose/state"
	}
	return stateurl.Redact(url)
}

func printCost(w io.Writer, rep *spend.Report, all bool) error {
	if len(rep.Resources) == 0 && len(rep.Ended) == 0 {
		fmt.Fprintf(w, "%s: no adapter reports what its resources cost\n", rep.App)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tSPENT\tDUE\tPER HOUR\tCOVERS")
	dash := func(s string) string {
		if s == "" || s == "0" {
			return "-"
		}
		return s
	}
	money := func(amount, currency string) string {
		if amount == "" || amount == "0" {
			return "-"
		}
		return amount + " " + currency
	}
	for _, r := range rep.Resources {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Resource, money(r.Amount, r.Currency), money(r.Due, r.Currency), money(r.PerHour, r.Currency), dash(r.Covers))
	}
	if all {
		for _, r := range rep.Ended {
			fmt.Fprintf(tw, "%s (removed %s)\t%s\t%s\t-\t%s\n", r.Resource, r.Ended.UTC().Format(time.DateTime), money(r.Amount, r.Currency), money(r.Due, r.Currency), dash(r.Covers))
		}
	}
	for _, t := range rep.Totals {
		label := "total"
		if t.Ended > 0 && !all {
			label = fmt.Sprintf("total (with %d removed: --all lists them)", t.Ended)
		} else if t.Ended > 0 {
			label = fmt.Sprintf("total (with %d removed)", t.Ended)
		}
		// No COVERS cell: a padded empty one would end the line in spaces.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", label, money(t.Amount, t.Currency), money(t.Due, t.Currency), money(t.PerHour, t.Currency))
	}
	return tw.Flush()
}
