package runner

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// The Engine calls the Runner makes, each bounded by Options.EngineTimeout
// (enginecall): an engine that takes the connection and never answers (a
// deadlocked dockerd) fails the call with an error naming it, instead of
// hanging gcompose until its CI job is killed.

// call runs one request/response exchange with the engine.
func (r *Runner) call(ctx context.Context, call, target string, fn func(context.Context) error) error {
	return enginecall.Call(ctx, r.cli.DaemonHost(), call, target, r.opts.EngineTimeout, fn)
}

func (r *Runner) start(ctx context.Context, id string) error {
	return r.call(ctx, "ContainerStart", shortID(id), func(ctx context.Context) error {
		return r.cli.ContainerStart(ctx, id, container.StartOptions{})
	})
}

func (r *Runner) inspect(ctx context.Context, id string) (container.InspectResponse, error) {
	return enginecall.Get(ctx, r.cli.DaemonHost(), "ContainerInspect", shortID(id), r.opts.EngineTimeout,
		func(ctx context.Context) (container.InspectResponse, error) { return r.cli.ContainerInspect(ctx, id) })
}

func (r *Runner) imageInspect(ctx context.Context, ref string) (image.InspectResponse, error) {
	return enginecall.Get(ctx, r.cli.DaemonHost(), "ImageInspect", ref, r.opts.EngineTimeout,
		func(ctx context.Context) (image.InspectResponse, error) { return r.cli.ImageInspect(ctx, ref) })
}

func (r *Runner) containerList(ctx context.Context, f filters.Args) ([]container.Summary, error) {
	return enginecall.Get(ctx, r.cli.DaemonHost(), "ContainerList", "", r.opts.EngineTimeout,
		func(ctx context.Context) ([]container.Summary, error) {
			return r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		})
}

// removeBound bounds each call of a removal: at most cleanupTimeout, so
// that the clean-up after a hung call does not wait as long again.
func (r *Runner) removeBound() time.Duration { return min(r.opts.EngineTimeout, cleanupTimeout) }

// removeDetached removes a container on a context that outlives ctx (a
// removal must happen after a timeout or a cancel too), bounded: retries
// for cleanupTimeout, plus one call's bound so that a last hung call is
// reported as such.
func (r *Runner) removeDetached(ctx context.Context, id string) error {
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+r.removeBound())
	defer cancel()
	return r.remove(rmCtx, id)
}

// shortID is the 12-character form of a container ID docker ps shows.
func shortID(id string) string { return id[:min(12, len(id))] }
