package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/runner"
)

func stateFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "state", Value: ".gcompose/state", EnvVars: []string{"GCOMPOSE_STATE"}, Usage: "state backend `URL`: a directory, file://DIR, etcd://host:2379[,host2:2379]/prefix (docs/state.md)"},
		&cli.DurationFlag{Name: "lock-timeout", Usage: "wait up to `DURATION` for a state lock someone else holds; 0 fails at once", Action: checkLockTimeout},
		&cli.StringFlag{Name: "app", Usage: "application `NAME` (default: the descriptor's meta.name)"},
		stateKeyFlag(),
	}, etcdFlags()...)
}

func engineFlags() []cli.Flag {
	return append(append(stateFlags(),
		&cli.IntFlag{Name: "parallelism", Value: 10, Usage: "`N` resources worked on at once"},
		&cli.DurationFlag{Name: "call-timeout", Value: runner.DefaultTimeout, Usage: "kill an adapter call that runs longer"},
		&cli.DurationFlag{Name: "output-timeout", Value: 2 * time.Minute, Usage: "wait this long for a dependency output that is not reported yet"},
		&cli.BoolFlag{Name: "verbose", Usage: "pass verbose to adapters and show their stderr"},
	), imageFlags()...)
}

// interruptGraceFlag is --interrupt-grace of the commands that run the
// engine (interrupt.go).
func interruptGraceFlag() cli.Flag {
	return &cli.DurationFlag{Name: "interrupt-grace", Value: defaultInterruptGrace,
		Usage: "after a first Ctrl-C (SIGINT/SIGTERM), wait up to `DURATION` for the actions under way to finish before aborting them; a second Ctrl-C aborts at once"}
}

// checkLockTimeout refuses a negative --lock-timeout: it would silently
// mean 0 (fail at once), not a wait. urfave/cli runs it for a flag set on
// the command line or through its environment variable.
func checkLockTimeout(c *cli.Context, d time.Duration) error {
	if d < 0 {
		return withCode(exitUsage, fmt.Errorf("%s %s: must be 0 (fail at once when someone else holds the lock) or more, such as 30s", flagSaid(c, "lock-timeout"), d))
	}
	return nil
}
