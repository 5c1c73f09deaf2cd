// Command golem-service is the adapter image gcompose/golem-service:dev: one
// instance of a GAP-16 service rented from one Golem provider (see
// docs/golem.md).
package main

import (
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() { sdk.Main(service.Adapter()) }
