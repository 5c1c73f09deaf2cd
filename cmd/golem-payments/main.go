// Command golem-payments is the adapter image gcompose/golem-payments:dev:
// the allocation of a Golem app and, run with the argument "keep", its
// long-lived payments keeper; run with "watch", the market watcher of a
// yagna and requestor (see docs/golem.md).
package main

import (
	"os"

	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/service"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == service.WatchArg {
		longlived.Main(service.WatchArg, payments.MainWatch, payments.Adapter())
	}
	longlived.Main(payments.KeepArg, payments.MainKeep, payments.Adapter())
}
