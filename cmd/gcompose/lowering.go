package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/adapters/golem/lowering"
	"github.com/gcompose/gcompose/core/lower"
)

// imageFlags name the adapter images of the Golem lowering (adapters/golem/lowering).
func imageFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "network-image", Value: lowering.DefaultImages().Network, Usage: "adapter image for GAP-16 networks"},
		&cli.StringFlag{Name: "service-image", Value: lowering.DefaultImages().Service, Usage: "adapter image for GAP-16 services"},
		&cli.StringFlag{Name: "payments-image", Value: lowering.DefaultImages().Payments, Usage: "adapter image for a Golem app's payments (allocation and keeper)"},
		&cli.StringFlag{Name: "proxy-image", Value: lowering.DefaultImages().Proxy, Usage: "adapter image for the local HTTP/TCP proxies of Golem services"},
	}
}

// lowerer is how this CLI maps services and networks onto adapters: the
// Golem lowering with the adapter images of its flags. Everything else
// sees only core/lower.Lowering.
func lowerer(c *cli.Context) lower.Lowering {
	return lowering.Golem{Images: lowering.Images{Network: c.String("network-image"), Service: c.String("service-image"),
		Payments: c.String("payments-image"), Proxy: c.String("proxy-image")},
		// The engine the runner reaches (core/runner: client.FromEnv).
		Engine: os.Getenv("DOCKER_HOST")}
}
