package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
)

// confirmUnlessStopped is confirm, given up at an interrupt (the read of
// the answer cannot be interrupted; it is left behind).
func confirmUnlessStopped(stop context.Context, r io.Reader, w io.Writer, mode plan.Mode) (bool, error) {
	type answer struct {
		ok  bool
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		ok, err := confirm(r, w, mode)
		ch <- answer{ok, err}
	}()
	select {
	case a := <-ch:
		return a.ok, a.err
	case <-stop.Done():
		fmt.Fprintln(w)
		return false, apply.ErrInterrupted
	}
}

// confirm asks on a terminal; without one it refuses rather than blocking or
// guessing, so a forgotten --yes in CI fails clearly.
func confirm(r io.Reader, w io.Writer, mode plan.Mode) (bool, error) {
	if !progress.InputIsTerminal(r) {
		return false, withCode(exitError, fmt.Errorf("not asking for confirmation without a terminal: pass --yes to %s", mode))
	}
	fmt.Fprintf(w, "Do you want to %s? Only 'yes' will be accepted: ", mode)
	line, _ := bufio.NewReader(r).ReadString('\n')
	return strings.TrimSpace(line) == "yes", nil
}

// renderOptions wraps long plan values at the terminal's width; a plan
// piped to a file or a CI log keeps every value on one line.
func renderOptions(c *cli.Context) plan.RenderOptions {
	return plan.RenderOptions{Width: progress.Width(c.App.Writer)}
}
