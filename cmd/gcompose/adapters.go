package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/project"
)

// openSession assembles what runs the application from the command's
// flags (core/project: the state with secrets encrypted, the guarded
// adapters). p is nil when no descriptor was given (--app alone). info and
// warn receive notes for people; nil drops them.
func openSession(c *cli.Context, app string, p *project.Project, info, warn func(string)) (*project.Session, error) {
	st, err := openStore(c)
	if err != nil {
		return nil, err
	}
	return openSessionOn(c, app, p, st, info, warn)
}

// openSessionOn is openSession on a store already open, which the session
// closes (gcompose reconcile opens a session per cycle on one store).
func openSessionOn(c *cli.Context, app string, p *project.Project, st *project.State, info, warn func(string)) (*project.Session, error) {
	codec, err := stateCodec(c)
	if err != nil {
		st.Close()
		return nil, err
	}
	cache, err := adapter.DefaultCacheDir()
	if err != nil {
		cache = ""
	}
	var stderr io.Writer
	if c.Bool("verbose") {
		stderr = c.App.ErrWriter
	}
	s, err := project.Open(c.Context, project.Options{
		Project:       p,
		App:           app,
		Lowering:      lowerer(c),
		Store:         st.Store(),
		Codec:         codec,
		Redactor:      redactor(c),
		Version:       version,
		CallTimeout:   c.Duration("call-timeout"),
		CacheDir:      cache,
		Verbose:       c.Bool("verbose"),
		Stderr:        stderr,
		Wrap:          withCrashPoint,
		Parallelism:   c.Int("parallelism"),
		LockTimeout:   c.Duration("lock-timeout"),
		OutputTimeout: c.Duration("output-timeout"),
		Info:          info,
		Warn:          warn,
	})
	if err != nil {
		st.Close()
		return nil, withCode(exitError, err)
	}
	return s, nil
}
