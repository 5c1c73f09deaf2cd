// Command golem-network is the adapter image gcompose/golem-network:dev: a
// GAP-16 network as a VPN of the yagna Net API (see docs/golem.md).
package main

import (
	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() { sdk.Main(network.Adapter()) }
