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
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/atomicfile"
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

// Plug is a host path the descriptor offers to adapter containers.
type Plug struct {
	Path     string
	ReadOnly bool
	// ResourceNames and ResourceTypes are regular expressions matched at the
	// start of the resource's name as written in the descriptor
	// (address.AdapterName: n0, not resources.n0) / the image reference:
	// Python's re.match on the manifest key, as in Deployster. A plug with
	// neither is offered to every resource.
	ResourceNames []string
	ResourceTypes []string
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

// flight is one computation shared by every caller that asks for the same
// key while it runs, and remembered after it succeeded.
type flight[T any] struct {
	done chan struct{}
	val  T
	err  error
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

// do runs fn once per key among concurrent callers and remembers its
// outcome for the life of the Client: a success, and a failure too (an
// image that is missing or answers init wrongly does so for every resource
// of the run; nothing is asked twice for one answer). Only a failure of the
// caller's own context is forgotten, so that a later call tries again.
func do[T any](ctx context.Context, c *Client, m map[string]*flight[T], key string, fn func() (T, error)) (T, error) {
	c.mu.Lock()
	f, ok := m[key]
	if !ok {
		f = &flight[T]{done: make(chan struct{})}
		m[key] = f
		c.mu.Unlock()
		f.val, f.err = fn()
		if f.err != nil && ctx.Err() != nil {
			c.mu.Lock()
			delete(m, key)
			c.mu.Unlock()
		}
		close(f.done)
		return f.val, f.err
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// ImageID resolves an image reference once per Client.
func (c *Client) ImageID(ctx context.Context, ref string) (string, error) {
	return do(ctx, c, c.ids, ref, func() (string, error) { return c.opts.Runner.ImageID(ctx, ref) })
}

// Init returns what the adapter image answered to init, running it at most
// once per image ID: from memory, else from the disk cache, else by running
// the image (default entrypoint, no args) for resourceName.
func (c *Client) Init(ctx context.Context, image, resourceName string) (*Info, error) {
	id, err := c.ImageID(ctx, image)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", resourceName, err)
	}
	info, err := do(ctx, c, c.inits, id, func() (*Info, error) {
		if info := c.loadInit(id, image); info != nil {
			return info, nil
		}
		info, raw, err := c.runInit(ctx, image, id, resourceName)
		if err != nil {
			return nil, &initError{resource: resourceName, err: err}
		}
		c.saveInit(id, raw)
		return info, nil
	})
	var ie *initError
	if errors.As(err, &ie) {
		if ie.resource != resourceName {
			// The init that failed ran for another resource of the image.
			return nil, fmt.Errorf("%s: adapter image %s unusable: %w", resourceName, image, ie.err)
		}
		return nil, ie.err
	}
	return info, err
}

// initError remembers which resource a failed init ran for.
type initError struct {
	resource string
	err      error
}

func (e *initError) Error() string { return e.err.Error() }
func (e *initError) Unwrap() error { return e.err }

func (c *Client) runInit(ctx context.Context, image, id, resource string) (*Info, []byte, error) {
	// Deployster's init request names the resource as written in the
	// manifest, like its other calls.
	req := protocol.Request{Name: address.AdapterName(resource), Type: image, Version: c.opts.Version, Verbose: c.opts.Verbose, Workspace: c.opts.Workspace}
	stdin, err := json.Marshal(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: init call: encode request: %w", resource, err)
	}
	timeout := c.opts.InitTimeout
	if timeout == 0 {
		timeout = c.opts.Timeout
	}
	res, err := c.opts.Runner.Run(ctx, runner.Spec{
		Image: id, Stdin: stdin, App: "", Resource: resource, Call: protocol.CallInit,
		Timeout: timeout, StdoutLimit: c.opts.StdoutLimit, Stderr: c.stderr(),
	})
	if err != nil {
		return nil, nil, named(image, err)
	}
	info, err := c.parseInit(image, id, res.Stdout)
	if err != nil {
		return nil, nil, c.answerError(resource, protocol.CallInit, image, res, err)
	}
	if info.Ext && info.Protocol != protocol.Version {
		return nil, nil, fmt.Errorf("%s: init call: adapter image %s speaks gcompose protocol %d, this gcompose speaks %d; %s",
			resource, image, info.Protocol, protocol.Version, upgradeHint(info.Protocol))
	}
	return info, res.Stdout, nil
}

func upgradeHint(v int) string {
	if v > protocol.Version {
		return "upgrade gcompose or use an older adapter image"
	}
	return "upgrade the adapter image"
}

// named gives a runner error the image reference the user wrote, instead of
// the image ID the container was run from.
func named(image string, err error) error {
	var ce *runner.CallError
	if errors.As(err, &ce) && strings.HasPrefix(ce.Image, "sha256:") {
		c := *ce
		c.Image = image
		return &c
	}
	return err
}

func (c *Client) parseInit(image, id string, raw []byte) (*Info, error) {
	if err := checkJSON(raw); err != nil {
		return nil, err
	}
	if err := c.v.ValidateInitResult(raw); err != nil {
		return nil, err
	}
	var ir protocol.InitResult
	if err := json.Unmarshal(raw, &ir); err != nil {
		return nil, err
	}
	info := &Info{ImageRef: image, ImageID: id, Init: ir}
	if ir.Gcompose != nil {
		info.Ext = true
		info.Protocol = ir.Gcompose.Protocol
	}
	return info, nil
}

// cacheEntry is one init answer on disk.
type cacheEntry struct {
	ImageID string          `json:"image_id"`
	Answer  json.RawMessage `json:"answer"`
}

func (c *Client) cachePath(id string) string {
	return filepath.Join(c.opts.CacheDir, strings.ReplaceAll(id, ":", "-")+".json")
}

// loadInit reads a cached init answer; anything wrong with it (missing,
// unreadable, no longer valid, another protocol version) means "run init".
func (c *Client) loadInit(id, image string) *Info {
	if c.opts.CacheDir == "" {
		return nil
	}
	raw, err := os.ReadFile(c.cachePath(id))
	if err != nil {
		return nil
	}
	var e cacheEntry
	if err := json.Unmarshal(raw, &e); err != nil || e.ImageID != id {
		return nil
	}
	info, err := c.parseInit(image, id, e.Answer)
	if err != nil || (info.Ext && info.Protocol != protocol.Version) {
		return nil
	}
	c.log.Debug("init answer from cache", "image", image, "id", id)
	return info
}

// saveInit writes the answer atomically; a failure only costs a later init.
func (c *Client) saveInit(id string, answer []byte) {
	if c.opts.CacheDir == "" {
		return
	}
	raw, err := json.Marshal(cacheEntry{ImageID: id, Answer: json.RawMessage(answer)})
	if err == nil {
		err = os.MkdirAll(c.opts.CacheDir, 0o755)
	}
	if err == nil {
		err = atomicfile.WriteFile(c.cachePath(id), raw)
	}
	if err != nil {
		c.log.Warn("cannot cache init answer", "image", id, "err", err)
	}
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
		return nil, fmt.Errorf("%s: state call: adapter image %s speaks plain Deployster, which cannot be asked to make a resource %s", t.Name, t.Image, desired)
	}
	mounts, err := mountsFor(info, t)
	if err != nil {
		return nil, err
	}
	req := c.request(t, info)
	if info.Ext {
		req.Gcompose = &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallState, Desired: desired, Persisted: persisted, Env: c.env(info), Lineage: t.Lineage, Estimate: t.Estimate}
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
	return &sr, nil
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
	if info.Ext {
		req.Gcompose = &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallAction, Action: a.Name, Persisted: persisted, Env: c.env(info),
			Lineage: t.Lineage, Operation: t.Operation}
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
	text, identity, err := protocol.ParseIdentityLines(res.Stdout)
	out := &ActionResult{Output: text, Identity: withStreamed(identity)}
	if err != nil {
		return out, fmt.Errorf("%s: %s call: %w; %s", t.Name, call, err, runner.FormatTail(res.StderrTail))
	}
	return out, nil
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
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, App: t.App, Call: protocol.CallCheck, Env: c.env(info), Lineage: t.Lineage}}
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
		return nil, fmt.Errorf("%s: %s call: encode request: %w", t.Name, call, err)
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

// mountsFor picks the plugs to mount: those the adapter declared that the
// descriptor defines and that apply to the resource, read-only unless both
// the descriptor's plug is writable and the adapter wants it writable. A
// plug the adapter requires that cannot be mounted is an error; an optional
// one is skipped. Nothing else is ever mounted (not the Docker socket, not
// the workspace).
func mountsFor(info *Info, t Target) ([]runner.Mount, error) {
	names := make([]string, 0, len(info.Init.Plugs))
	for name := range info.Init.Plugs {
		names = append(names, name)
	}
	sort.Strings(names)
	var mounts []runner.Mount
	for _, name := range names {
		want := info.Init.Plugs[name]
		p, ok := t.Plugs[name]
		if !ok {
			if want.Optional {
				continue
			}
			return nil, fmt.Errorf("%s: adapter %s requires plug %q, which the descriptor does not define (add it under plugs:)", t.Name, t.Image, name)
		}
		// Patterns name resources as the descriptor writes them, even one
		// whose adapter still receives the address it was created under.
		allowed, err := p.allows(address.AdapterName(t.Name), t.Image)
		if err != nil {
			return nil, fmt.Errorf("%s: plug %q: %w", t.Name, name, err)
		}
		if !allowed {
			if want.Optional {
				continue
			}
			return nil, fmt.Errorf("%s: adapter %s requires plug %q, which the descriptor does not allow for this resource (resource_names/resource_types)", t.Name, t.Image, name)
		}
		if p.ReadOnly && want.IsWritable() && !want.Optional {
			return nil, fmt.Errorf("%s: adapter %s requires plug %q writable, but the descriptor makes it read_only", t.Name, t.Image, name)
		}
		if p.ReadOnly && want.IsWritable() {
			continue
		}
		if p.Path == "" {
			return nil, fmt.Errorf("%s: plug %q has no path", t.Name, name)
		}
		mounts = append(mounts, runner.Mount{HostPath: p.Path, ContainerPath: want.ContainerPath, ReadOnly: p.ReadOnly || !want.IsWritable()})
	}
	return mounts, nil
}

// allows tells whether the plug applies to a resource: Deployster's rule (a
// name pattern or a type pattern matches at the start; no pattern at all
// means every resource).
func (p Plug) allows(name, typ string) (bool, error) {
	if len(p.ResourceNames) == 0 && len(p.ResourceTypes) == 0 {
		return true, nil
	}
	for _, set := range []struct {
		pats []string
		s    string
		what string
	}{{p.ResourceNames, name, "resource_names"}, {p.ResourceTypes, typ, "resource_types"}} {
		for _, pat := range set.pats {
			re, err := regexp.Compile(`^(?:` + pat + `)`)
			if err != nil {
				return false, fmt.Errorf("%s: bad regular expression %q: %w", set.what, pat, err)
			}
			if re.MatchString(set.s) {
				return true, nil
			}
		}
	}
	return false, nil
}

// stderr is the writer adapters' stderr lines go to, serialized.
func (c *Client) stderr() io.Writer {
	if c.opts.Stderr == nil {
		return nil
	}
	return syncwriter.Writer{Mu: &c.stderrMu, W: c.opts.Stderr}
}
