// Command golem-payments is the adapter image gcompose/golem-payments:dev:
// the allocation of a Golem app and, run with the argument "keep", its
// long-lived payments keeper (see docs/golem.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == payments.KeepArg {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := payments.MainKeep(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	sdk.Main(payments.Adapter())
}
