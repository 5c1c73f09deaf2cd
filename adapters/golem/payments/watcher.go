package payments

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// The market watcher (adapters/golem/service/watch.go) runs this image with
// service.WatchArg: a long-lived container like the keeper, but one per
// yagna URL and requestor identity rather than per app, since the market is
// the same for every app of a requestor. The payments resource starts or
// adopts it (its state call comes first in every plan and deploy of a
// Golem app, and this adapter holds the Docker socket; its check, earlier
// still, launches it: check.go; neither for a refresh or a destroy, which
// estimate nothing) and registers its app with it; its delete releases the
// app, and the watcher stops when none is left. What fails here is logged,
// not returned: without a watcher the service adapter reads its own offer
// book, as before.

// LabelWatcher marks the market watcher's container; LabelYagna names the
// yagna it watches.
const (
	LabelWatcher = "gcompose.offer-watcher"
	LabelYagna   = "gcompose.yagna-url"
)

// watcherApp is how an app's state registers with the watcher.
func watcherApp(app, lineage string) string { return app + "/" + lineage }

// MainWatch is the watcher container's main.
func MainWatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	yc, err := longlived.Connect(stdin, log) // it logs what failed
	if err != nil {
		return 1
	}
	yc.Logger = log
	return service.RunWatcher(ctx, yc, args, stdout, log)
}

// ensureWatcher starts the market watcher of the request's yagna unless one
// runs, and registers the app with it.
func ensureWatcher(ctx context.Context, req *sdk.Request, app string) {
	if err := startWatcher(ctx, req, app); err != nil {
		req.Log.Warn("market watcher not started: each run gathers its own offers", "err", err)
	}
}

// watcherOf is the yagna client, the requestor identity and the client of
// the market watcher a request's app shares with every app of that yagna
// and identity.
func watcherOf(ctx context.Context, req *sdk.Request) (*yagna.Client, string, *service.WatchClient, error) {
	yc, err := network.Client(req)
	if err != nil {
		return nil, "", nil, err
	}
	node, err := longlived.Node(ctx, yc)
	if err != nil {
		return nil, "", nil, err
	}
	return yc, node, service.NewWatchClient(yc.BaseURL, node, yc.AppKey), nil
}

func startWatcher(ctx context.Context, req *sdk.Request, app string) error {
	yc, node, wc, err := watcherOf(ctx, req)
	if err != nil {
		return err
	}
	reg := func() error { return wc.Register(ctx, watcherApp(app, req.Lineage())) }
	if _, err := ping(ctx, wc, 0); err == nil {
		return reg()
	}
	d, err := longlived.Docker()
	if err != nil {
		return err
	}
	defer d.Close()
	name := service.WatchContainer(yc.BaseURL, node)
	// One that does not answer: starting (another run's), of another
	// version, or stopping. It is given a moment, then replaced.
	if ins, err := d.ContainerInspect(ctx, name); err == nil {
		if ins.State != nil && ins.State.Running {
			if st, err := ping(ctx, wc, 3*time.Second); err == nil {
				return reg()
			} else if st.Version != "" {
				_ = wc.Stop(ctx)
			}
		}
		timeout := 5
		_ = d.ContainerStop(ctx, ins.ID, container.StopOptions{Timeout: &timeout})
		if err := d.ContainerRemove(ctx, ins.ID, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("removing the market watcher %s that does not answer: %w", name, err)
		}
	}
	spec, err := watcherSpec(req, yc, node)
	if err != nil {
		return err
	}
	_, err = longlived.Start(ctx, d, spec, 30*time.Second)
	switch {
	case err == nil:
		req.Log.Info("market watcher started", "container", name)
	case errdefs.IsConflict(err):
		// Another run started it at the same moment.
		if _, err := ping(ctx, wc, 10*time.Second); err != nil {
			return err
		}
	default:
		return err
	}
	return reg()
}

// watcherSpec is the container of the market watcher of yc's yagna for
// the requestor identity node.
func watcherSpec(req *sdk.Request, yc *yagna.Client, node string) (longlived.Spec, error) {
	args := []string{service.WatchArg, "--idle", service.DefaultWatchIdle.String()}
	if v, ok := req.Env(service.WatchRefreshEnv); ok && v != "" {
		if _, err := time.ParseDuration(v); err != nil {
			return longlived.Spec{}, fmt.Errorf("%s=%q: want a duration such as 1m: %w", service.WatchRefreshEnv, v, err)
		}
		args = append(args, "--refresh", v)
	}
	return longlived.Spec{
		ContainerName: service.WatchContainer(yc.BaseURL, node), AutoRemove: true, Image: req.Type, Node: node, Args: args,
		Secrets: map[string]string{"YAGNA_API_URL": yc.BaseURL, "YAGNA_APPKEY": yc.AppKey}, Config: map[string]string{"yagna": yc.BaseURL},
		Labels: map[string]string{LabelWatcher: "true", LabelYagna: yc.BaseURL},
	}, nil
}

// ping asks the watcher how it is, for up to wait.
func ping(ctx context.Context, wc *service.WatchClient, wait time.Duration) (service.WatchStatus, error) {
	deadline := time.Now().Add(wait)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := wc.Ping(pctx)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(pingEvery):
		}
	}
}

// pingEvery is how often ping asks a watcher that does not answer yet: a
// dial to its abstract socket costs microseconds, and a watcher the check
// launched (check.go) is waited for on the plan's critical path.
const pingEvery = 20 * time.Millisecond

// releaseWatcher tells the watcher the app is gone; when it was the last,
// it waits (bounded) until the watcher has unsubscribed its demands and
// stopped.
func releaseWatcher(ctx context.Context, req *sdk.Request, yc *yagna.Client, app string) {
	node, err := longlived.Node(ctx, yc)
	if err != nil {
		req.Log.Warn("market watcher not released", "err", err)
		return
	}
	wc := service.NewWatchClient(yc.BaseURL, node, yc.AppKey)
	left, err := wc.Release(ctx, watcherApp(app, req.Lineage()))
	if err != nil {
		req.Log.Debug("market watcher not released", "err", err)
		return
	}
	if left > 0 {
		return
	}
	gctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := wc.Gone(gctx); err != nil {
		req.Log.Warn("market watcher did not stop", "err", err)
		return
	}
	req.Printf("market watcher stopped: %s was the last app it watched for", app)
}
