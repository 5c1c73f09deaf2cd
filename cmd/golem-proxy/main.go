// Command golem-proxy is the adapter image gcompose/golem-proxy:dev: the
// local HTTP/TCP proxies of a Golem service and, run with the argument
// "proxy", the long-lived proxy itself (see docs/golem.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gcompose/gcompose/adapters/golem/proxy"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == proxy.ProxyArg {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := proxy.MainProxy(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	sdk.Main(proxy.Adapter())
}
