// Package adapter is the protocol client: it drives adapter images through
// the Deployster protocol (extended by gcompose) on top of core/runner.
//
// init runs once per image ID: its answer is cached in memory for the life of
// the Client and on disk across runs (Options.CacheDir). Every answer is
// validated against the protocol schemas, and every config against the
// adapter's config_schema before the state call; a violation is an error
// naming the resource, the call and the JSON pointer, with the adapter's
// stderr tail.
//
// Adapters whose init answer offers serve mode get one long-lived container
// per image, network and set of plugs for the whole run (serve.go); call
// Client.Close when the run ends so that those finish gracefully (if
// gcompose dies instead, their stdin closes and they go away by themselves).
package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/protocol"
)

// Runner runs one container to completion; *runner.Runner is the real one.
type Runner interface {
	Run(ctx context.Context, s runner.Spec) (*runner.Result, error)
	ImageID(ctx context.Context, ref string) (string, error)
}

// Validator checks answers and configs; *protocol.Validator is the real one.
type Validator interface {
	ValidateInitResult(data []byte) error
	ValidateStateResult(data []byte) error
	ValidateSweepResult(data []byte) error
	ValidateCheckResult(data []byte) error
	ValidateConfig(schema json.RawMessage, config any) error
}

// Options configure a Client.
type Options struct {
	// Runner runs the containers (required).
	Runner Runner
	// Validator checks answers; nil: protocol.NewValidator().
	Validator Validator
	// CacheDir keeps init answers across runs, one file per image ID; ""
	// keeps them in memory only. DefaultCacheDir gives the usual place.
	CacheDir string
	// Version is the gcompose version sent in every request.
	Version string
	// Verbose and Workspace are sent in every request, as in Deployster.
	Verbose   bool
	Workspace string
	// Stderr receives the adapters' stderr live, each line prefixed with the
	// resource name; nil: only kept for error messages. Writes are
	// serialized by the Client.
	Stderr io.Writer
	// Timeout of each call (0: the runner's default); InitTimeout of init
	// calls (0: Timeout).
	Timeout     time.Duration
	InitTimeout time.Duration
	// StdoutLimit caps each answer in bytes (0: the runner's default).
	StdoutLimit int64
	// NoServe keeps every call in its own container even when an adapter
	// offers serve mode.
	NoServe bool
	// NoActionState never asks an action for its resource's state
	// (protocol.RequestExt.AnswerState), even of an adapter that offers it:
	// the caller then makes the verifying state call as for any adapter.
	// For comparison (benchmarks) and to rule the extension out.
	NoActionState bool
	// LookupEnv reads the environment variables an adapter asks for in its
	// init answer (gcompose.env); their values go on stdin only. nil:
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// DefaultCacheDir is $XDG_CACHE_HOME/gcompose/init (or the platform's user
// cache directory).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("init cache directory: %w", err)
	}
	return filepath.Join(dir, "gcompose", "init"), nil
}

// Info is what gcompose knows of an adapter image after init.
type Info struct {
	// ImageRef is the reference init was first asked for; ImageID the image
	// it resolved to (the cache key).
	ImageRef string
	ImageID  string
	Init     protocol.InitResult
	// Ext is true when the adapter answered init with a gcompose member: it
	// speaks gcompose's extensions, and only then receives them.
	Ext bool
	// Protocol is the gcompose protocol version it speaks (0: plain Deployster).
	Protocol int
}

// Target is one resource for a state or action call.
type Target struct {
	App string
	// Name is the resource's address, for messages and container labels;
	// AdapterName the name sent to the adapter ("": address.AdapterName(Name),
	// which plugs' resource_names always match).
	Name        string
	AdapterName string
	Image       string // the adapter image reference (the resource's type)
	Config      map[string]any
	// Plugs are all the plugs the descriptor defines, by name; the client
	// mounts only those the adapter declared and that apply to the resource.
	Plugs map[string]Plug
	// Lineage is the state's lineage, sent on every call to adapters that
	// speak gcompose ("" on a plan before the first deploy).
	Lineage string
	// Operation is, on action calls, the pending operation recorded just
	// before the call (its ID is the idempotency key).
	Operation *protocol.Operation
	// Estimate marks a state call made only for the cost estimate
	// (protocol.RequestExt.Estimate).
	Estimate bool
	// AnswerState, on the last action call of a STALE answer, asks an
	// adapter that offers it (InitExt.ActionState) to end the action with
	// the state the verifying state call for this desired presence
	// (protocol.Present, Absent) would answer: ActionResult.State. "":
	// not asked.
	AnswerState string
	// PlannedCost is, on action calls, the cost the approved plan showed
	// for the resource (protocol.RequestExt.PlannedCost).
	PlannedCost *protocol.Cost
	// Replace marks a state call made by plan only, for a resource apply
	// will remove and create anew (protocol.RequestExt.Replace).
	Replace bool
	// Refresh marks the state calls of a refresh
	// (protocol.RequestExt.Refresh).
	Refresh bool
	// Mode is, on check calls, the run the check is made for
	// (protocol.RequestExt.Mode).
	Mode string
	// CreateBeforeDestroy asks, on state calls, for a rebuild that creates
	// first (protocol.RequestExt.CreateBeforeDestroy); sent only to an
	// adapter that declared it.
	CreateBeforeDestroy bool
	// ReportIdentity, if set, is called on action calls of gcompose
	// adapters with each identity report as soon as the adapter makes it,
	// while the action still runs (in order, before Action returns), so
	// that the caller can persist it at once.
	ReportIdentity func(identity map[string]any)
}

// adapterName is the name the adapter receives for t.
func (t Target) adapterName() string {
	if t.AdapterName != "" {
		return t.AdapterName
	}
	return address.AdapterName(t.Name)
}

// ActionResult is what an action produced.
type ActionResult struct {
	// Output is the action's stdout without identity lines: free text for
	// the user.
	Output string
	// Identity are the identifying attributes the action reported (nil if
	// none), to be persisted at once.
	Identity map[string]any
	// State is the state answer the action ended with when the call asked
	// for it (Target.AnswerState) and the adapter gave it, checked against
	// the state answer's schema; nil otherwise: make the state call.
	State *protocol.StateResult
}

// Client is the protocol client. It is safe for concurrent use.
type Client struct {
	opts Options
	v    Validator
	log  *slog.Logger

	stderrMu sync.Mutex // serializes Options.Stderr

	mu    sync.Mutex
	ids   map[string]*flight[string] // image ref -> image ID
	inits map[string]*flight[*Info]  // image ID -> init answer
	slots map[string]*slot           // serve-mode servers by serveKey
}

// New makes a Client.
func New(opts Options) (*Client, error) {
	if opts.Runner == nil {
		return nil, errors.New("adapter client: no runner")
	}
	v := opts.Validator
	if v == nil {
		pv, err := protocol.NewValidator()
		if err != nil {
			return nil, fmt.Errorf("adapter client: %w", err)
		}
		v = pv
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{opts: opts, v: v, log: log, ids: map[string]*flight[string]{}, inits: map[string]*flight[*Info]{}, slots: map[string]*slot{}}, nil
}

// ImageID resolves an image reference once per Client.
func (c *Client) ImageID(ctx context.Context, ref string) (string, error) {
	return do(ctx, c, c.ids, ref, func() (string, error) { return c.opts.Runner.ImageID(ctx, ref) })
}

// State asks the adapter for the resource's state: desired is
// protocol.Present (deploy) or protocol.Absent (destroy, gcompose adapters
// only). The config is validated against the adapter's config_schema first.
func (c *Client) State(ctx context.Context, t Target, desired string, persisted *protocol.Persisted) (*protocol.StateResult, error) {
	info, err := c.Init(ctx, t.Image, t.Name)
	if err != nil {
		return nil, err
	}
	if err := c.v.ValidateConfig(info.Init.ConfigSchema, t.Config); err != nil {
		return nil, configError(t, err)
	}
	if desired == "" {
		desired = protocol.Present
	}
	if desired != protocol.Present && !info.Ext {
		return nil, plan.Named(t.Name, fmt.Errorf("state call: adapter image %s speaks plain Deployster, which cannot be asked to make a resource %s", t.Image, desired))
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return nil, err
	}
	req := c.request(t, info)
	if info.Ext {
		req.Gcompose = &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallState, Desired: desired, Persisted: persisted, Env: c.env(info), Lineage: t.Lineage, Estimate: t.Estimate, Replace: t.Replace, Refresh: t.Refresh,
			CreateBeforeDestroy: t.CreateBeforeDestroy && info.Init.Gcompose.CreateBeforeDestroy}
	}
	res, err := c.run(ctx, t, info, info.Init.StateAction, protocol.CallState, req, mounts, nil)
	if err != nil {
		return nil, err
	}
	raw := res.Stdout
	verr := checkJSON(raw)
	if verr == nil {
		verr = c.v.ValidateStateResult(raw)
	}
	if verr != nil {
		return nil, c.answerError(t.Name, protocol.CallState, t.Image, res, verr)
	}
	var sr protocol.StateResult
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, c.answerError(t.Name, protocol.CallState, t.Image, res, err)
	}
	return declaredOnly(info, &sr), nil
}

// declaredOnly drops what an answer reports that its adapter did not
// declare at init: spent is read only from an adapter that said its state
// answers report it (InitExt.Spend), so that a spend member is never taken
// from an adapter that means something else by it.
func declaredOnly(info *Info, sr *protocol.StateResult) *protocol.StateResult {
	if sr.Gcompose != nil && sr.Gcompose.Spent != nil && (info.Init.Gcompose == nil || !info.Init.Gcompose.Spend) {
		sr.Gcompose.Spent = nil
	}
	return sr
}

// Action runs one action of a STALE answer. staleState is that answer's
// staleState ({} if none). The action's stdout is free text for the user,
// except lines reporting identifying attributes (gcompose adapters only).
func (c *Client) Action(ctx context.Context, t Target, a protocol.ActionSpec, staleState json.RawMessage, persisted *protocol.Persisted) (*ActionResult, error) {
	info, err := c.Init(ctx, t.Image, t.Name)
	if err != nil {
		return nil, err
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return nil, err
	}
	req := c.request(t, info)
	req.StaleState = staleState
	if len(strings.TrimSpace(string(staleState))) == 0 || string(staleState) == "null" {
		req.StaleState = json.RawMessage("{}")
	}
	answer := c.asksState(info, t)
	if info.Ext {
		req.Gcompose = &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallAction, Action: a.Name, Persisted: persisted, Env: c.env(info),
			Lineage: t.Lineage, Operation: t.Operation, PlannedCost: t.PlannedCost}
		if answer {
			req.Gcompose.AnswerState, req.Gcompose.Desired = true, t.AnswerState
		}
	}
	call := protocol.CallAction
	if a.Name != "" {
		call = protocol.CallAction + " " + a.Name
	}
	// Identity reported while the action runs is handed on at once and
	// kept: it counts even if the action then fails.
	var streamed map[string]any
	var report func(map[string]any)
	if info.Ext && t.ReportIdentity != nil {
		report = func(identity map[string]any) {
			if len(identity) == 0 {
				return
			}
			if streamed == nil {
				streamed = map[string]any{}
			}
			maps.Copy(streamed, identity)
			t.ReportIdentity(identity)
		}
	}
	withStreamed := func(identity map[string]any) map[string]any {
		if len(streamed) == 0 {
			return identity
		}
		merged := maps.Clone(streamed)
		maps.Copy(merged, identity)
		return merged
	}
	res, err := c.run(ctx, t, info, a, protocol.CallAction, req, mounts, report)
	if err != nil {
		// A failed action may have created something before failing: keep
		// the identity it reported so the engine persists it.
		if info.Ext {
			var identity map[string]any
			if res != nil {
				if _, id, perr := protocol.ParseIdentityLines(res.Stdout); perr == nil {
					identity = id
				}
			}
			if identity = withStreamed(identity); len(identity) > 0 {
				return &ActionResult{Identity: identity}, err
			}
		}
		return nil, err
	}
	if !info.Ext {
		return &ActionResult{Output: string(res.Stdout)}, nil
	}
	if !answer {
		text, identity, err := protocol.ParseIdentityLines(res.Stdout)
		out := &ActionResult{Output: text, Identity: withStreamed(identity)}
		if err != nil {
			return out, plan.Named(t.Name, fmt.Errorf("%s call: %w; %s", call, err, runner.FormatTail(res.StderrTail)))
		}
		return out, nil
	}
	parsed, err := protocol.ParseActionOutput(res.Stdout)
	out := &ActionResult{Output: parsed.Text, Identity: withStreamed(parsed.Identity)}
	if err == nil && parsed.State != nil {
		out.State, err = c.actionState(info, parsed.State)
	}
	if err != nil {
		return out, plan.Named(t.Name, fmt.Errorf("%s call: %w (adapter %s); %s", call, err, t.Image, runner.FormatTail(res.StderrTail)))
	}
	return out, nil
}

// asksState says whether an action call asks the adapter for its
// resource's state at its end: the caller wants it, the adapter offers it
// and the client may ask.
func (c *Client) asksState(info *Info, t Target) bool {
	return t.AnswerState != "" && !c.opts.NoActionState && info.Ext && info.Init.Gcompose != nil && info.Init.Gcompose.ActionState
}

// actionState checks the state line of an action as the answer of a state
// call is checked.
func (c *Client) actionState(info *Info, raw json.RawMessage) (*protocol.StateResult, error) {
	if err := c.v.ValidateStateResult(raw); err != nil {
		return nil, fmt.Errorf("state line: %w", err)
	}
	var sr protocol.StateResult
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, fmt.Errorf("state line: %w", err)
	}
	return declaredOnly(info, &sr), nil
}

// Sweep asks a sweep-capable adapter (InitExt.Sweep) for the objects it made
// for the application that no state names, terminating them when
// q.Terminate. t names the adapter image (Image), the application and
// lineage; its Name picks the plugs to mount (those of a resource of the
// type) but is not sent: the request's name is "". The answer is validated
// against schemas/protocol/sweep-result.json.
func (c *Client) Sweep(ctx context.Context, t Target, q protocol.SweepRequest) (*protocol.SweepResult, error) {
	info, err := c.Init(ctx, t.Image, t.Name)
	if err != nil {
		return nil, err
	}
	if !info.Ext || !info.Init.Gcompose.Sweep {
		return nil, fmt.Errorf("sweep call: adapter image %s does not offer sweep", t.Image)
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return nil, err
	}
	if q.Known == nil {
		q.Known = []protocol.KnownResource{}
	}
	req := protocol.Request{Name: "", Type: t.Image, Version: c.opts.Version, Verbose: c.opts.Verbose, Workspace: c.opts.Workspace,
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallSweep, Env: c.env(info), Lineage: t.Lineage, Sweep: &q}}
	st := t
	st.Name = "sweep " + t.Image // names the call in errors and container labels
	res, err := c.run(ctx, st, info, protocol.ActionSpec{Args: []string{protocol.SweepArg}}, protocol.CallSweep, req, mounts, nil)
	if err != nil {
		return nil, err
	}
	raw := res.Stdout
	verr := checkJSON(raw)
	if verr == nil {
		verr = c.v.ValidateSweepResult(raw)
	}
	if verr != nil {
		return nil, c.answerError(st.Name, protocol.CallSweep, t.Image, res, verr)
	}
	var sr protocol.SweepResult
	if err := json.Unmarshal(raw, &sr); err != nil {
		return nil, c.answerError(st.Name, protocol.CallSweep, t.Image, res, err)
	}
	return &sr, nil
}

// ErrNothingToCheck is Check's answer for an adapter that requires no
// environment variable and offers no check call.
var ErrNothingToCheck = errors.New("the adapter requires nothing and offers no check")

// Check tells whether the adapter can work at all: first that the
// environment variables its init answer requires are set (without running
// anything), then, when it offers one, its check call. A problem is an
// answer (OK false), not an error: errors are for a call that failed.
func (c *Client) Check(ctx context.Context, t Target) (*protocol.CheckResult, error) {
	info, err := c.Init(ctx, t.Image, t.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNothingToCheck, err)
	}
	if !info.Ext || (len(info.Init.Gcompose.EnvRequired) == 0 && !info.Init.Gcompose.Check) {
		return nil, ErrNothingToCheck
	}
	var missing []string
	for _, name := range info.Init.Gcompose.EnvRequired {
		if v, ok := c.opts.LookupEnv(name); !ok || v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return &protocol.CheckResult{Problem: strings.Join(missing, " and ") + " " + verb + " not set in gcompose's environment"}, nil
	}
	if !info.Init.Gcompose.Check {
		return &protocol.CheckResult{OK: true}, nil
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return nil, err
	}
	req := protocol.Request{Name: "", Type: t.Image, Version: c.opts.Version, Verbose: c.opts.Verbose, Workspace: c.opts.Workspace,
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallCheck, Env: c.env(info), Lineage: t.Lineage, Mode: t.Mode}}
	ct := t
	ct.Name = "check " + t.Image // names the call in errors and container labels
	res, err := c.run(ctx, ct, info, protocol.ActionSpec{Args: []string{protocol.CheckArg}}, protocol.CallCheck, req, mounts, nil)
	if err != nil {
		return nil, err
	}
	verr := checkJSON(res.Stdout)
	if verr == nil {
		verr = c.v.ValidateCheckResult(res.Stdout)
	}
	if verr != nil {
		return nil, c.answerError(ct.Name, protocol.CallCheck, t.Image, res, verr)
	}
	var cr protocol.CheckResult
	if err := json.Unmarshal(res.Stdout, &cr); err != nil {
		return nil, c.answerError(ct.Name, protocol.CallCheck, t.Image, res, err)
	}
	return &cr, nil
}

// request builds the Deployster fields of a state or action request.
func (c *Client) request(t Target, info *Info) protocol.Request {
	cfg := t.Config
	if cfg == nil {
		cfg = map[string]any{}
	}
	return protocol.Request{Name: t.adapterName(), Type: t.Image, Version: c.opts.Version, Verbose: c.opts.Verbose,
		Workspace: c.opts.Workspace, Config: cfg}
}

// env collects the values of the environment variables the adapter asked
// for; a variable that is not set is left out.
func (c *Client) env(info *Info) map[string]string {
	if !info.Ext || len(info.Init.Gcompose.Env) == 0 {
		return nil
	}
	env := make(map[string]string, len(info.Init.Gcompose.Env))
	for _, name := range info.Init.Gcompose.Env {
		if v, ok := c.opts.LookupEnv(name); ok {
			env[name] = v
		}
	}
	return env
}

// run runs a state or action container as spec says: each of image,
// entrypoint and args defaults to the resource's image, its entrypoint, no
// args.
//
// kind is protocol.CallState, CallAction or CallSweep; an action's name is
// spec.Name. Calls go to the adapter's server when it offers serve mode.
// report, on action calls, receives identity reports as the adapter makes
// them (served: interim lines; one-shot: identity lines read as they come).
func (c *Client) run(ctx context.Context, t Target, info *Info, spec protocol.ActionSpec, kind string, req protocol.Request, mounts []runner.Mount, report func(map[string]any)) (*runner.Result, error) {
	call := kind
	if kind == protocol.CallAction && spec.Name != "" {
		call = kind + " " + spec.Name
	}
	network := ""
	if info.Ext {
		network = info.Init.Gcompose.Network
	}
	if c.canServe(info, spec) {
		sr := protocol.ServeRequest{Call: kind, Args: spec.Args, Request: req}
		if kind == protocol.CallAction {
			sr.Action = spec.Name
		}
		resp, tail, err := c.serveCall(ctx, t, info, network, mounts, sr, call, report)
		if err != nil {
			return nil, err
		}
		if resp.Error != "" {
			// What the action printed before failing still counts: its
			// identity lines name what it already created.
			return &runner.Result{Stdout: []byte(resp.Stdout), StderrTail: tail},
				fmt.Errorf("adapter %s call %s for %s failed (served): %s; %s", t.Image, call, t.Name, resp.Error, runner.FormatTail(tail))
		}
		out := []byte(resp.Result)
		if kind == protocol.CallAction {
			out = []byte(resp.Stdout)
		}
		return &runner.Result{Stdout: out, StderrTail: tail}, nil
	}

	stdin, err := json.Marshal(req)
	if err != nil {
		return nil, plan.Named(t.Name, fmt.Errorf("%s call: encode request: %w", call, err))
	}
	image, shown := info.ImageID, t.Image
	if spec.Image != "" {
		image, shown = spec.Image, spec.Image
	}
	var entrypoint []string
	if spec.Entrypoint != "" {
		entrypoint = []string{spec.Entrypoint}
	}
	rs := runner.Spec{
		Image: image, Entrypoint: entrypoint, Args: spec.Args, Stdin: stdin, Mounts: mounts, Network: network,
		App: t.App, Resource: t.Name, Call: call,
		Timeout: c.opts.Timeout, StdoutLimit: c.opts.StdoutLimit, Stderr: c.stderr(),
	}
	if report != nil {
		rs.StdoutLine = func(line []byte) {
			rest, ok := bytes.CutPrefix(line, []byte(protocol.IdentityPrefix))
			if !ok {
				return
			}
			var identity map[string]any
			// A malformed line is reported when the action ends.
			if json.Unmarshal(rest, &identity) == nil && identity != nil {
				report(identity)
			}
		}
	}
	res, err := c.opts.Runner.Run(ctx, rs)
	if err != nil {
		return res, named(shown, err)
	}
	return res, nil
}

// stderr is the writer adapters' stderr lines go to, serialized.
func (c *Client) stderr() io.Writer {
	if c.opts.Stderr == nil {
		return nil
	}
	return syncwriter.Writer{Mu: &c.stderrMu, W: c.opts.Stderr}
}
