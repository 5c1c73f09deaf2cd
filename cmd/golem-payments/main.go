// Command golem-payments is the adapter image gcompose/golem-payments:dev:
// the allocation of a Golem app and, run with the argument "keep", its
// long-lived payments keeper (see docs/golem.md).
package main

import (
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
)

func main() {
	longlived.Main(payments.KeepArg, payments.MainKeep, payments.Adapter())
}
