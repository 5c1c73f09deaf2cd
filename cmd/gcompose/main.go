// Command gcompose deploys multi-service applications from declarative
// descriptors and keeps them converged. See README.md and docs/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
)

// commit is set at build time (-ldflags "-X main.commit=...").
var commit = "unknown"

const version = "0.1.0"

// Exit codes, documented in docs/cli.md.
const (
	exitOK      = 0
	exitError   = 1 // anything failed, or the descriptor is invalid
	exitChanges = 2 // plan --detailed-exitcode: there are changes
	exitUsage   = 64
	// exitInterrupted (130) is in interrupt.go.
)

// exitCodeError carries an exit code through urfave/cli.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitCodeError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitCodeError{code: code, err: err} }

func main() {
	// SIGINT and SIGTERM are interrupts, in stages (interrupt.go).
	it := newInterrupts(context.Background(), os.Exit)
	sig := make(chan os.Signal, 3)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		for range sig {
			it.signal()
		}
	}()
	// A write to a closed pipe returns EPIPE instead of killing the process
	// (lostoutput.go says what a lost output does).
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	go func() {
		for range pipe {
		}
	}()
	stdout := &lostOutput{w: os.Stdout, lost: it.outputLost}
	stderr := &lostOutput{w: os.Stderr, lost: it.outputLost}
	os.Exit(runWith(it, os.Args, os.Stdin, stdout, stderr))
}

// run is main without the process: tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runWith(newInterrupts(ctx, os.Exit), args, stdin, stdout, stderr)
}

func runWith(it *interrupts, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Everything printed goes through the run's secret redactor (secrets.go).
	red, stdout, stderr, flush := redactOutput(stdout, stderr)
	defer flush()
	app := newApp(stdin, stdout, stderr)
	app.Metadata = map[string]any{redactorKey: red, interruptsKey: it}
	err := app.RunContext(it.hard, reorderArgs(app, args))
	if err == nil {
		return exitOK
	}
	var ec *exitCodeError
	if errors.As(err, &ec) {
		switch {
		case ec.err != nil && ec.code == exitInterrupted:
			// Not an error: what the user asked for.
			msg := ec.err.Error()
			fmt.Fprintln(stderr, strings.ToUpper(msg[:1])+msg[1:])
		case ec.err != nil:
			fmt.Fprintln(stderr, "Error:", ec.err)
		}
		return ec.code
	}
	fmt.Fprintln(stderr, "Error:", err)
	return exitError
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "gcompose",
		Usage:                "deploy multi-service applications from a declarative descriptor and keep them converged",
		Version:              version + " (commit " + buildCommit() + ")",
		Reader:               stdin,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // run() reports errors and picks exit codes
		// -f before the command, as in docker compose -f app.yaml logs -f.
		Flags: []cli.Flag{fileFlag()},
		Commands: []*cli.Command{
			validateCommand(),
			configCommand(),
			graphCommand(),
			planCommand(),
			deployCommand(),
			destroyCommand(),
			refreshCommand(),
			psCommand(),
			reconcileCommand(), costCommand(),
			outputCommand(),
			stateCommand(),
			unlockCommand(),
			versionCommand(),
			diffCommand(),
			logsCommand(),
			completionCommand(),
		},
	}
	for _, cmd := range app.Commands {
		switch cmd.Name {
		case "plan", "deploy", "destroy":
			if cmd.BashComplete == nil {
				cmd.BashComplete = completeTargets // --target and --replace take addresses
			}
		}
	}
	setUpHelp(app)
	return app
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version and the commit it was built from",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "gcompose version %s (commit %s)\n", version, buildCommit())
			return nil
		},
	}
}
