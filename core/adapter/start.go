package adapter

import (
	"context"
	"fmt"

	"github.com/gcompose/gcompose/protocol"
)

// Start starts the server that t's calls go to, when its adapter serves
// (init answered from the cache or run first), and returns once it runs:
// a run starts the servers of all its adapters at once, while it loads its
// state, instead of each on its adapter's first call, one after another
// along the dependency graph. An adapter that does not serve starts
// nothing. The server is the one t's state and action calls use (same
// image, network and mounts), so nothing starts twice.
func (c *Client) Start(ctx context.Context, t Target) error {
	info, err := c.Init(ctx, t.Image, t.Name)
	if err != nil {
		return err
	}
	if !c.canServe(info, protocol.ActionSpec{}) {
		return nil
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return err
	}
	network := info.Init.Gcompose.Network
	if _, err := c.serverOf(ctx, c.slotOf(serveKey(info, network, mounts)), t, info, network, mounts); err != nil {
		return fmt.Errorf("starting the server of adapter %s: %w", t.Image, err)
	}
	return nil
}
