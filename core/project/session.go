package project

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/display"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/lower"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Options assemble a Session.
type Options struct {
	// Project is the loaded descriptor; nil when there is none (an
	// application named by --app alone: its state and adapters only).
	Project *Project
	// App is the application's name; "" is the project's.
	App string
	// Lowering maps services and networks onto adapters; nil is the
	// project's, else lower.Generic. Its plugs are offered unasked.
	Lowering lower.Lowering
	// Store is the state backend. The session encrypts secrets in it with
	// Codec (nil: no key given) and closes it.
	Store state.Store
	Codec *secret.Codec
	// Redactor collects the run's secrets; nil: a new one.
	Redactor *secret.Redactor

	// Version is gcompose's, sent to adapters and recorded in locks.
	Version string
	// CallTimeout bounds one adapter call (0: the runner's default).
	CallTimeout time.Duration
	// CacheDir keeps adapter init answers across runs ("" in memory only).
	CacheDir string
	// Verbose is passed to adapters; their stderr goes to Stderr (nil: kept
	// for error messages only).
	Verbose bool
	Stderr  io.Writer
	// LookupEnv reads the environment variables adapters ask for; nil: the
	// process environment. Credentials among them become secrets.
	LookupEnv func(string) (string, bool)
	// Labels are added to every container the session starts (tests).
	Labels map[string]string
	// Wrap, when set, wraps the adapters inside the secret guard (the
	// CLI's crash point for its crash tests).
	Wrap func(plan.Adapters) plan.Adapters

	// Parallelism, LockTimeout and OutputTimeout are the engine's
	// (core/engine.Engine).
	Parallelism   int
	LockTimeout   time.Duration
	OutputTimeout time.Duration
	// Info and Warn receive notes for people (a plug directory created; a
	// leftover container removed). Nil: dropped.
	Info, Warn func(msg string)
}

// Session is what runs one application: its state and its adapters, with
// the secret guards. Close it.
type Session struct {
	App     string
	Project *Project
	// Store is the state, secrets encrypted in it and learnt on load.
	Store state.Store
	// Adapters are the application's adapter images, guarded: secret
	// fields are learnt before each call, secret container args refused.
	Adapters plan.Adapters
	// Client answers init (cached), for what adapters declare.
	Client *adapter.Client

	opts   Options
	red    *secret.Redactor
	runner *runner.Runner
	plugs  map[string]adapter.Plug
}

// Open assembles a session. Nothing is called yet: the Docker Engine is
// first asked when an adapter is.
func Open(ctx context.Context, opts Options) (*Session, error) {
	if opts.Store == nil {
		return nil, errors.New("project.Open: no state store")
	}
	if opts.Redactor == nil {
		opts.Redactor = secret.NewRedactor()
	}
	if opts.Lowering == nil {
		opts.Lowering = lower.Generic{}
		if opts.Project != nil {
			opts.Lowering = opts.Project.Lowering
		}
	}
	app := opts.App
	if app == "" && opts.Project != nil {
		app = opts.Project.Name()
	}
	if app == "" {
		return nil, errors.New("project.Open: which application? no project and no name")
	}
	// What the runner and the adapter client warn about (a container the
	// engine would not remove, limits it ignores, a served adapter
	// restarted) reaches people: Warn, or the default logger without it.
	warnings := runner.WarnLogger(opts.Warn)
	rn, err := runner.New(ctx, runner.Options{Timeout: opts.CallTimeout, Logger: warnings, Labels: opts.Labels})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Docker Engine: %w", err)
	}
	cl, err := adapter.New(adapter.Options{
		Runner:   rn,
		CacheDir: opts.CacheDir,
		Version:  opts.Version,
		Verbose:  opts.Verbose,
		Stderr:   opts.Stderr,
		// Credentials sent to adapters on stdin are secrets of the run.
		LookupEnv: CredentialEnv(opts.LookupEnv, opts.Redactor),
		Timeout:   opts.CallTimeout,
		Logger:    warnings,
	})
	if err != nil {
		rn.Close()
		return nil, fmt.Errorf("adapter client: %w", err)
	}
	pl := plugs(opts.Project, opts.Lowering)
	var inner plan.Adapters = &adapter.ContainerAdapters{Client: cl, Plugs: pl}
	if opts.Wrap != nil {
		inner = opts.Wrap(inner)
	}
	return &Session{
		App:      app,
		Project:  opts.Project,
		Store:    GuardStore(opts.Store, opts.Codec, opts.Redactor),
		Adapters: GuardAdapters(inner, cl, opts.Redactor),
		Client:   cl,
		opts:     opts,
		red:      opts.Redactor,
		runner:   rn,
		plugs:    pl,
	}, nil
}

// plugs are the descriptor's plugs, then those the lowering offers unasked
// (the Golem adapters that run long-lived containers get the Docker socket
// without the descriptor naming it).
func plugs(p *Project, l lower.Lowering) map[string]adapter.Plug {
	out := map[string]adapter.Plug{}
	if p != nil {
		for name, pl := range p.App.Plugs {
			out[name] = adapter.Plug{Path: p.PlugPaths[name], ReadOnly: pl.ReadOnly, ResourceNames: pl.ResourceNames, ResourceTypes: pl.ResourceTypes}
		}
	}
	for name, pl := range l.Plugs() {
		if _, ok := out[name]; !ok {
			out[name] = pl
		}
	}
	return out
}

// Close stops the adapter containers the session still runs and closes
// the state store.
func (s *Session) Close() error {
	return errors.Join(s.runner.Close(), s.Store.Close())
}

// Run is one plan, deploy, destroy or refresh.
type Run struct {
	Mode plan.Mode
	// PlanOnly stops after planning (plan, refresh).
	PlanOnly bool
	// Targets, Replace, ForceNewState, Saved, Confirm and Stop are
	// engine.Request's.
	Targets       []string
	Replace       []string
	ForceNewState bool
	Saved         *plan.Plan
	Confirm       func(*plan.Plan) (bool, error)
	Stop          context.Context
	// Observer sees each step of the run as it goes (progress).
	Observer apply.Observer
}

// Result is what a run did and, after a deploy applied without error,
// where the application is.
type Result struct {
	// Outcome is the engine's; nil when the run stopped before it started.
	Outcome *engine.Outcome
	// Endpoints are the URLs the adapters' summaries name.
	Endpoints []display.Endpoint
	// Outputs are the descriptor's outputs: section evaluated, secrets
	// masked.
	Outputs Outputs
}

// Run plans and, unless PlanOnly, applies. A deploy needs the project; a
// destroy lowers it when there is one, so that protect: true guards
// against it too. Errors are the engine's, unwrapped: callers match them
// with errors.Is and errors.As (apply.ErrInterrupted, engine.ErrDeclined,
// *engine.StaleSavedError, ...).
func (s *Session) Run(ctx context.Context, r Run) (*Result, error) {
	res := &Result{}
	var want map[string]*plan.Resource
	switch {
	case r.Mode == plan.Deploy && s.Project == nil:
		return res, fmt.Errorf("deploying %s needs its descriptor", s.App)
	case r.Mode == plan.Deploy || r.Mode == plan.Destroy && s.Project != nil:
		var err error
		if want, err = s.Project.Desired(); err != nil {
			return res, err
		}
	}
	if s.Project != nil && !r.PlanOnly && r.Mode == plan.Deploy && s.opts.Codec == nil && len(s.Project.Resolved.Secrets) > 0 {
		return res, &MissingKeyError{Secrets: s.Project.SecretNames()}
	}
	if s.Project != nil {
		if err := s.Project.EnsurePlugDirs(s.opts.Info); err != nil {
			return res, err
		}
	}
	e := &engine.Engine{
		Adapters:      s.Adapters,
		Store:         s.Store,
		Parallelism:   s.opts.Parallelism,
		LockTimeout:   s.opts.LockTimeout,
		Version:       s.opts.Version,
		OutputTimeout: s.opts.OutputTimeout,
		Observer:      r.Observer,
		Cleanup:       adapter.RunnerCleanup(s.runner),
		Existing:      adapter.RunnerExisting(s.runner),
		Warm:          adapter.RunnerWarm(s.runner, s.Client, s.plugs),
		Release:       s.Client.Close,
		Log: func(format string, args ...any) {
			if s.opts.Warn != nil {
				s.opts.Warn(fmt.Sprintf(format, args...))
			}
		},
	}
	req := engine.Request{App: s.App, Mode: r.Mode, Desired: want, PlanOnly: r.PlanOnly, ForceNewState: r.ForceNewState,
		Targets: r.Targets, Replace: r.Replace, Saved: r.Saved, Confirm: r.Confirm, Stop: r.Stop}
	if s.Project != nil {
		req.Outputs = s.Project.Outputs()
	}
	out, err := e.Run(ctx, req)
	res.Outcome = out
	if err != nil || r.PlanOnly || r.Mode != plan.Deploy {
		return res, err
	}
	doc, lerr := s.Store.Load(ctx, s.App)
	if lerr != nil {
		res.Outputs.Err = fmt.Errorf("reading the state for endpoints and outputs: %w", lerr)
		return res, nil
	}
	res.Endpoints = display.Endpoints(doc, s.Summaries(ctx, nil))
	res.Outputs = s.outputs(doc)
	return res, nil
}

// Outputs evaluates the descriptor's outputs: section against the state,
// secrets masked.
func (s *Session) Outputs(ctx context.Context) (Outputs, error) {
	if s.Project == nil {
		return Outputs{}, nil
	}
	doc, err := s.Store.Load(ctx, s.App)
	if err != nil {
		return Outputs{}, fmt.Errorf("loading state of %s: %w", s.App, err)
	}
	return s.outputs(doc), nil
}

func (s *Session) outputs(doc *state.Document) Outputs {
	if s.Project == nil {
		return Outputs{}
	}
	o := AppOutputs(doc, s.Project.Outputs())
	o.Values = s.red.MaskMap(o.Values)
	return o
}

// Summaries asks each adapter image once for the outputs it wants shown
// (its init answer's summary); one that cannot be asked shows none, and
// warn (when set) says so once.
func (s *Session) Summaries(ctx context.Context, warn func(string)) display.Summaries {
	return Summaries(ctx, s.Client, warn)
}

// Summaries is Session.Summaries for any init answerer.
func Summaries(ctx context.Context, cl Initer, warn func(string)) display.Summaries {
	seen := map[string]*protocol.Summary{}
	return func(image string) *protocol.Summary {
		if s, ok := seen[image]; ok {
			return s
		}
		var s *protocol.Summary
		info, err := cl.Init(ctx, image, image)
		switch {
		case err != nil:
			if warn != nil {
				warn(fmt.Sprintf("adapter %s did not answer init, so its resources show no provider, address or URL: %v", image, err))
			}
		case info.Ext && info.Init.Gcompose != nil:
			s = info.Init.Gcompose.Summary
		}
		seen[image] = s
		return s
	}
}
