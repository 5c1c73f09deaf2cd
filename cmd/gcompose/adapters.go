package main

import (
	"io"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/runner"
)

// newAdapters connects to the Docker Engine and returns the engine's
// adapters; the descriptor (if any) contributes its plugs.
func newAdapters(c *cli.Context, app string, p *project) (*engine.ContainerAdapters, *runner.Runner, func(), error) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := runner.New(c.Context, runner.Options{Timeout: c.Duration("call-timeout"), Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	cache, err := adapter.DefaultCacheDir()
	if err != nil {
		cache = ""
	}
	var stderr io.Writer
	if c.Bool("verbose") {
		stderr = c.App.ErrWriter
	}
	cl, err := adapter.New(adapter.Options{
		Runner:   r,
		CacheDir: cache,
		Version:  version,
		Verbose:  c.Bool("verbose"),
		Stderr:   stderr,
		// Credentials sent to adapters on stdin are secrets of the run.
		LookupEnv: credentialEnv(redactor(c)),
		Timeout:   c.Duration("call-timeout"),
		Logger:    log,
	})
	if err != nil {
		r.Close()
		return nil, nil, nil, err
	}
	plugs := map[string]adapter.Plug{}
	if p != nil {
		for name, pl := range p.app.Plugs {
			path := plugHostPath(p, name)
			plugs[name] = adapter.Plug{Path: path, ReadOnly: pl.ReadOnly, ResourceNames: pl.ResourceNames, ResourceTypes: pl.ResourceTypes}
		}
	}
	// The Golem adapters that run long-lived containers get the Docker
	// socket without the descriptor naming it (adapters/golem/lowering, docs/golem.md).
	for name, pl := range lowerer(c).Plugs() {
		if _, ok := plugs[name]; !ok {
			plugs[name] = pl
		}
	}
	return &engine.ContainerAdapters{Client: cl, Plugs: plugs}, r, func() { r.Close() }, nil
}
