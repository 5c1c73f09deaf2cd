package payments

import (
	"context"

	"github.com/containerd/errdefs"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// check is the adapter's preflight check (yagna answers and takes the app
// key, network.Check), and it launches the market watcher when none runs.
//
// The check is this adapter's first call of every plan, deploy, destroy and
// refresh (the request's mode says which: it launches for a plan or deploy
// only): gcompose makes it once the state is loaded, on the adapter's
// server. The payments state call that starts (or adopts) the watcher and
// registers the app comes only after the preflight; the service estimates,
// whose first offer window starts when they open the watcher's pages, come
// after it. A watcher started there made a cold plan wait its start (a
// container, then its ready line) on top of the window. Launched here and
// not waited for, it gets ready while the preflight ends; the state call
// finds it running and waits only for what is left of its start
// (startWatcher: ping), then registers the app as before. What fails here
// is not the check's problem: the state call starts the watcher then.
func check(ctx context.Context, req *sdk.Request) error {
	if err := network.Check(ctx, req); err != nil {
		return err
	}
	// Only for a plan or deploy, as the state call (payments.go state): a
	// refresh or a destroy estimates and rents nothing.
	if req.CheckMode() != "deploy" {
		return nil
	}
	if err := launchWatcher(ctx, req); err != nil {
		req.Log.Debug("market watcher not launched by the check: the state call starts it", "err", err)
	}
	return nil
}

// launchWatcher starts the market watcher's container unless one answers
// or exists (starting, stopping: the state call deals with it), without
// waiting until it is ready.
func launchWatcher(ctx context.Context, req *sdk.Request) error {
	yc, node, wc, err := watcherOf(ctx, req)
	if err != nil {
		return err
	}
	if _, err := ping(ctx, wc, 0); err == nil {
		return nil
	}
	d, err := longlived.Docker()
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.ContainerInspect(ctx, service.WatchContainer(yc.BaseURL, node)); err == nil || !errdefs.IsNotFound(err) {
		return err
	}
	spec, err := watcherSpec(req, yc, node)
	if err != nil {
		return err
	}
	if _, err := longlived.Launch(ctx, d, spec); err != nil && !errdefs.IsConflict(err) {
		return err
	}
	req.Log.Info("market watcher launched", "container", spec.ContainerName)
	return nil
}
