package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/display"
	"github.com/gcompose/gcompose/core/project"
)

func psCommand() *cli.Command {
	return &cli.Command{
		Name:      "ps",
		Usage:     "list the application's services and resources: status, provider, address, URL, age",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Description: `Reads the state; which outputs are the provider, the address and the URL is each adapter's to say
   (its init answer's summary, docs/protocol.md), so gcompose asks each adapter image for its init answer
   (cached). A service behind a local proxy shows the proxy's URL. AGE is since the resource was created
   or last rebuilt.`,
		Flags: append(append(descriptorFlags(), stateFlags()...),
			&cli.BoolFlag{Name: "json", Usage: "print the rows as JSON"}),
		Action:       runPs,
		BashComplete: cli.DefaultCompleteWithFlags(nil),
	}
}

func runPs(c *cli.Context) error {
	name, doc, err := loadAppState(c)
	if err != nil {
		return err
	}
	sess, err := openSession(c, name, nil, nil, nil)
	if err != nil {
		return withCode(exitError, fmt.Errorf("asking the adapters what to show: %w", err))
	}
	defer sess.Close()
	warn := func(msg string) { fmt.Fprintln(c.App.ErrWriter, "note:", msg) }
	rows := []psRow{}
	for _, r := range display.Rows(doc, sess.Summaries(c.Context, warn)) {
		row := psRow{Row: r, Status: string(r.Status)}
		if res := doc.Resources[r.Resource]; res != nil {
			row.Status, row.Failed = shownStatus(res), failedStep(res)
		}
		rows = append(rows, row)
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(c.App.Writer, "%s: nothing deployed\n", name)
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tPROVIDER\tIP\tURL\tAGE")
	for _, r := range rows {
		status := r.Status
		switch {
		case r.Failed != "":
			status += " (" + r.Failed + ")"
		case r.Pending != "":
			status += " (" + r.Pending + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Resource, status, dash(r.Provider), dash(r.IP), dash(r.URL), display.Age(now, r.Since))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shownStatus is a resource's status as ps and state tell it: Failed when
// its last step failed (its pending operation records the failure), never
// the status it had before, as if all were well.
func shownStatus(r *project.Resource) string {
	if r.Pending != nil && r.Pending.Failed != "" {
		return "Failed"
	}
	return string(r.Status)
}

// failedStep is the failed step and why, in one line ("" when none).
func failedStep(r *project.Resource) string {
	if r.Pending == nil || r.Pending.Failed == "" {
		return ""
	}
	what := string(r.Pending.Kind)
	if r.Pending.Action != "" && r.Pending.Action != what {
		what += " (action " + r.Pending.Action + ")"
	}
	return what + " failed: " + r.Pending.Failed
}

// psRow is a row of ps: the status told truly, with the failed step.
type psRow struct {
	display.Row
	Status string `json:"status"`
	Failed string `json:"failed,omitempty"`
}
