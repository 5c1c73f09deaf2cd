package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/display"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/jsonout"
)

// progressFlag is --progress on plan, deploy, destroy and refresh.
func progressFlag() cli.Flag {
	return &cli.StringFlag{Name: "progress", EnvVars: []string{"GCOMPOSE_PROGRESS"},
		Usage: "how to show progress on stderr, `MODE`: tty, plain, json or quiet (default: tty on a terminal, else plain; json with --json)"}
}

// newRenderer picks the progress mode: --progress, else json with --json
// (quiet for plan, whose --json output is the plan document alone), else
// tty on a terminal, else plain.
func newRenderer(c *cli.Context, command string) (*progress.Renderer, error) {
	var mode progress.Mode
	switch {
	case c.String("progress") != "":
		m, err := progress.ParseMode(c.String("progress"))
		if err != nil {
			return nil, withCode(exitUsage, err)
		}
		mode = m
	case c.Bool("json") && command == "plan":
		mode = progress.Quiet
	case c.Bool("json"):
		mode = progress.JSON
	default:
		mode = progress.DefaultMode(c.App.ErrWriter)
	}
	color := mode == progress.TTY && progress.ColorAllowed(os.Getenv)
	live := mode == progress.TTY && progress.IsTerminal(c.App.ErrWriter)
	return progress.New(c.App.ErrWriter, progress.Options{Mode: mode, Color: color, Live: live}), nil
}

// finishRun prints how a plan/deploy/destroy/refresh ended: the summary
// object as the last line of the JSON stream (and, with --json, on stdout
// for deploy and destroy), or a sentence for people.
func finishRun(c *cli.Context, r *progress.Renderer, command, app string, out *engine.Outcome, eps []display.Endpoint, outputs map[string]any, applied bool, took time.Duration, runErr error) {
	code := exitOK
	if runErr != nil {
		code = exitError
		if ec, ok := runErr.(*exitCodeError); ok {
			code = ec.code
		}
	}
	var pl *plan.Plan
	s := progress.Summary{}
	if out != nil && out.Plan != nil && runErr == nil && c.Bool("detailed-exitcode") {
		// What planCommand and refreshCommand will exit with.
		if command == "plan" && out.Plan.HasChanges() || command == "refresh" && out.Plan.Drifted() > 0 {
			code = exitChanges
		}
	}
	if out != nil {
		pl = out.Plan
		s = r.Summarize(command, app, pl, out.Result, applied, took, runErr, code)
		s.Swept = out.Swept
	} else {
		s = r.Summarize(command, app, nil, nil, applied, took, runErr, code)
	}
	s.Endpoints = eps
	s.Outputs = outputs
	r.WriteSummary(s)
	if !applied || runErr != nil {
		if c.Bool("json") && applied && runErr != nil {
			writeSummary(c, s)
		}
		return
	}
	if c.Bool("json") {
		writeSummary(c, s)
		return
	}
	if pl != nil && !pl.HasChanges() && s.Counts.Changed == 0 {
		fmt.Fprintf(c.App.Writer, "Nothing to do: the application is up to date (%s).\n", took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(c.App.Writer, "%s complete: %d resource(s) changed in %s.\n", strings.ToUpper(command[:1])+command[1:], s.Counts.Changed, took.Round(time.Millisecond))
	}
	printEndpoints(c.App.Writer, eps)
	printOutputs(c.App.Writer, outputs)
}

// printEndpoints ends a deploy with what the user came for: where to open it.
func printEndpoints(w io.Writer, eps []display.Endpoint) {
	if len(eps) == 0 {
		return
	}
	width := 0
	for _, e := range eps {
		width = max(width, len(e.Resource))
	}
	fmt.Fprintln(w, "\nEndpoints:")
	for _, e := range eps {
		fmt.Fprintf(w, "  %-*s → %s\n", width, e.Resource, e.URL)
	}
}

func writeSummary(c *cli.Context, s progress.Summary) {
	_ = jsonout.Line(c.App.Writer, s)
}

// printJSON writes v indented, as people and jq read it: nothing
// HTML-escaped (a ">" in a command stays ">").
func printJSON(w io.Writer, v any) error {
	return jsonout.Indented(w, v)
}
