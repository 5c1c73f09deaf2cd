// Command golem-proxy is the adapter image gcompose/golem-proxy:dev: the
// local HTTP/TCP proxies of a Golem service and, run with the argument
// "proxy", the long-lived proxy itself (see docs/golem.md).
package main

import (
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/proxy"
)

func main() {
	longlived.Main(proxy.ProxyArg, proxy.MainProxy, proxy.Adapter())
}
