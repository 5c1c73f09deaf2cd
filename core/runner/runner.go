// Package runner runs one adapter container to completion through the Docker
// Engine API (never the docker CLI): create, attach, start, write stdin, close
// it, demultiplex stdout and stderr, wait, remove. Containers are locked down
// (no new privileges, no capabilities, read-only root filesystem, no network
// unless asked, only the given mounts, memory/CPU/PID limits) and labelled so
// that leftovers of a crash can be found and removed.
//
// One call costs one Engine round trip per step and no polling: the wait for
// the exit code is issued right after start and answers when the container
// stops, while the attach stream carries its output.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// Labels every gcompose container carries.
const (
	LabelManaged  = "gcompose.managed"
	LabelApp      = "gcompose.app"
	LabelResource = "gcompose.resource"
	LabelCall     = "gcompose.call"
	// LabelLock and LabelLockScope name the state lock the run that started
	// the container held (state.Lock Info.ID and Scope): a later holder of
	// the same lock knows that run holds it no more.
	LabelLock      = "gcompose.lock"
	LabelLockScope = "gcompose.lock-scope"
)

// Defaults applied when a Spec or Options leaves a field zero.
const (
	DefaultTimeout     = 10 * time.Minute // gcompose --call-timeout
	DefaultStdoutLimit = 4 << 20          // bytes
	DefaultMemory      = 256 << 20        // bytes
	DefaultCPUs        = 1.0
	DefaultPids        = 256
	DefaultTmpfsSize   = "16m"
	StderrTailSize     = 4 << 10 // bytes kept for error messages
	SessionGrace       = 10 * time.Second
	cleanupTimeout     = 30 * time.Second
)

// Mount is a host path bind-mounted into the container.
type Mount struct {
	HostPath      string
	ContainerPath string
	ReadOnly      bool
}

// Spec is one container run.
type Spec struct {
	// Image is an image reference or ID; it must exist locally.
	Image string
	// Entrypoint overrides the image's entrypoint when non-empty.
	Entrypoint []string
	// Args is the container's command (the entrypoint's arguments).
	Args []string
	// Stdin is written to the container, then stdin is closed.
	Stdin []byte
	// Mounts are the only host paths the container sees.
	Mounts []Mount
	// Network is the Docker network mode; "" means "none".
	Network string

	// App, Resource and Call label the container (gcompose.app,
	// gcompose.resource, gcompose.call) and name it in errors and in the
	// prefix of forwarded stderr lines ("[services.db] ...").
	App      string
	Resource string
	Call     string
	// Labels are extra labels (the Runner's own extra labels are added too).
	Labels map[string]string

	// Timeout bounds the whole call (0: the Runner's default). A call past
	// it is killed and removed.
	Timeout time.Duration
	// StdoutLimit caps stdout in bytes (0: the Runner's default); an adapter
	// writing more is killed and the call refused.
	StdoutLimit int64
	// StdoutLine, if set, is called with every complete line of stdout (no
	// newline) as soon as the adapter writes it, in the caller's goroutine
	// and in order, before Run returns (it must not keep the slice).
	// Result.Stdout still holds it all.
	StdoutLine func(line []byte)
	// Stderr receives the adapter's stderr live, one Write per line, each
	// line prefixed with "[<Resource>] ". nil: stderr is only kept as a tail.
	// If shared between concurrent calls it must be safe for concurrent use.
	Stderr io.Writer

	// Memory in bytes and CPUs (fractions allowed); 0: the Runner's defaults.
	Memory int64
	CPUs   float64
}

// Result is what a finished container produced.
type Result struct {
	ContainerID string
	Stdout      []byte
	// StderrTail is the last ~4 KiB of stderr.
	StderrTail string
	ExitCode   int
	Duration   time.Duration
}

// Kind classifies a CallError.
type Kind int

const (
	// KindEngine: the Docker Engine refused or failed a step.
	KindEngine Kind = iota
	// KindTimeout: the call ran past its timeout and was killed.
	KindTimeout
	// KindCanceled: the caller canceled the call; the container was killed.
	KindCanceled
	// KindStdoutLimit: the adapter wrote more than the stdout cap.
	KindStdoutLimit
	// KindExit: the adapter exited with a non-zero code.
	KindExit
)

// CallError is every error Run returns. Its message names the image, the
// call and the resource, and carries the adapter's stderr tail.
type CallError struct {
	Image    string
	Call     string
	Resource string
	Kind     Kind
	// Step is the Engine step that failed (KindEngine only).
	Step       string
	Timeout    time.Duration
	ExitCode   int
	Limit      int64
	StderrTail string
	Err        error
	// Leftover is the ID of the call's container when its removal failed
	// too (a hung engine): it may still exist, and LeftoverErr says why.
	Leftover    string
	LeftoverErr error
}

func (e *CallError) Error() string {
	msg := e.message()
	if e.Leftover != "" {
		why := e.LeftoverErr.Error()
		if h, ok := errors.AsType[*enginecall.HungError](e.LeftoverErr); ok && errors.Is(e.Err, enginecall.ErrHung) {
			why = h.Short() // the advice is said once
		}
		msg += fmt.Sprintf("; its container %s could not be removed (%s): once the engine answers, remove it with docker rm -f %s", e.Leftover, why, e.Leftover)
	}
	return msg
}

func (e *CallError) message() string {
	what := fmt.Sprintf("adapter %s call %s for %s", e.Image, e.Call, e.Resource)
	switch e.Kind {
	case KindTimeout:
		return fmt.Sprintf("%s timed out after %s; %s", what, e.Timeout, FormatTail(e.StderrTail))
	case KindCanceled:
		return fmt.Sprintf("%s canceled: %v; %s", what, e.Err, FormatTail(e.StderrTail))
	case KindStdoutLimit:
		return fmt.Sprintf("%s refused: it wrote more than %d bytes to stdout (the limit); %s", what, e.Limit, FormatTail(e.StderrTail))
	case KindExit:
		return fmt.Sprintf("%s failed: exit code %d; %s", what, e.ExitCode, FormatTail(e.StderrTail))
	default:
		if e.StderrTail != "" {
			return fmt.Sprintf("%s: %s: %v; %s", what, e.Step, e.Err, FormatTail(e.StderrTail))
		}
		return fmt.Sprintf("%s: %s: %v", what, e.Step, e.Err)
	}
}

func (e *CallError) Unwrap() error { return e.Err }

// Options configure a Runner.
type Options struct {
	// Labels are added to every container (tests add gcompose.test=<name>).
	Labels map[string]string
	// Timeout, StdoutLimit, Memory and CPUs are defaults for Specs that
	// leave them zero.
	Timeout     time.Duration
	StdoutLimit int64
	Memory      int64
	CPUs        float64
	// Logger receives debug logs of each step; nil: slog.Default().
	Logger *slog.Logger
	// EngineTimeout bounds how long the engine may take to answer one call
	// (a create, a start, a removal, a list; for an attach or a wait, the
	// answer's start, not the stream after it) before gcompose takes it for
	// hung and fails the call with an *enginecall.HungError naming it;
	// 0: enginecall.DefaultBound. The adapter's own run is bounded by
	// Timeout, not by this.
	EngineTimeout time.Duration
}

// Runner runs adapter containers. It is safe for concurrent use.
type Runner struct {
	cli  *client.Client
	own  bool
	opts Options
	log  *slog.Logger

	// local: the engine is on this machine (a unix socket or named pipe);
	// probes: what a remote one answered about each host directory.
	local  bool
	probes sync.Map // host directory -> *probe
	// limitsOnce: whether the engine applies the limits asked for is
	// checked on the first container (checkLimits).
	limitsOnce sync.Once

	mu       sync.Mutex
	sessions map[*Session]struct{} // started and not yet stopped
	owner    *owner                // the lock this run holds (Own)
}

// owner is the state lock of the run the Runner works for.
type owner struct{ app, scope, lockID string }

// New connects to the Docker Engine from the environment (DOCKER_HOST, ...),
// pings it and negotiates the API version once (so that concurrent calls
// never race on a lazy negotiation). An unreachable Engine is an error.
func New(ctx context.Context, opts Options) (*Runner, error) {
	if host := os.Getenv(client.EnvOverrideHost); strings.HasPrefix(host, "ssh://") {
		// The docker CLI runs ssh for these; the Engine API client does not.
		return nil, fmt.Errorf("DOCKER_HOST=%s: gcompose does not run ssh; forward the engine's socket to a local port, "+
			"e.g. ssh -NL 127.0.0.1:2376:/var/run/docker.sock %s, and set DOCKER_HOST=tcp://127.0.0.1:2376 (docs/engines.md)",
			host, strings.TrimPrefix(host, "ssh://"))
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker engine client: %w", err)
	}
	ping, err := enginecall.Get(ctx, cli.DaemonHost(), "Ping", "", opts.EngineTimeout, func(ctx context.Context) (types.Ping, error) {
		return cli.Ping(ctx)
	})
	if errors.Is(err, enginecall.ErrHung) {
		cli.Close()
		return nil, err
	}
	if err != nil {
		cli.Close()
		hint := ""
		if os.Getenv(client.EnvOverrideHost) == "" {
			hint = " (with Podman, set DOCKER_HOST to its socket: docs/engines.md)"
		}
		return nil, fmt.Errorf("docker engine at %s unreachable: %w%s", cli.DaemonHost(), err, hint)
	}
	cli.NegotiateAPIVersionPing(ping)
	r := NewWithClient(cli, opts)
	r.own = true
	return r, nil
}

// NewWithClient uses an existing Engine client; Close leaves it open. A client
// created with API version negotiation must have negotiated already
// (NegotiateAPIVersion) before it is shared by concurrent calls.
func NewWithClient(cli *client.Client, opts Options) *Runner {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.StdoutLimit <= 0 {
		opts.StdoutLimit = DefaultStdoutLimit
	}
	if opts.Memory <= 0 {
		opts.Memory = DefaultMemory
	}
	if opts.CPUs <= 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.EngineTimeout <= 0 {
		opts.EngineTimeout = enginecall.DefaultBound
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Runner{cli: cli, opts: opts, log: log, local: localEngine(cli.DaemonHost()), sessions: map[*Session]struct{}{}}
}

// Close releases the Engine client if the Runner created it.
// It first stops the sessions (serve-mode containers) still running,
// letting each finish what it has in flight for up to SessionGrace.
func (r *Runner) Close() error {
	r.mu.Lock()
	open := make([]*Session, 0, len(r.sessions))
	for s := range r.sessions {
		open = append(open, s)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), SessionGrace)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(open))
	for i, s := range open {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Close(ctx)
		}()
	}
	wg.Wait()
	if r.own {
		errs = append(errs, r.cli.Close())
	}
	return errors.Join(errs...)
}

// Client is the underlying Engine client.
func (r *Runner) Client() *client.Client { return r.cli }

// errTimedOut is the cause of a call's context when its own timeout fired.
var errTimedOut = errors.New("call timed out")

// Run runs one container to completion and always removes it. A non-zero
// exit returns both the Result (with whatever stdout was written) and a
// *CallError of KindExit. Every other failure returns a *CallError.
func (r *Runner) Run(ctx context.Context, s Spec) (res *Result, err error) {
	start := time.Now()
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = r.opts.Timeout
	}
	limit := s.StdoutLimit
	if limit <= 0 {
		limit = r.opts.StdoutLimit
	}
	fail := func(kind Kind, step string, err error, tailText string) *CallError {
		return &CallError{Image: s.Image, Call: s.Call, Resource: s.Resource, Kind: kind, Step: step,
			Timeout: timeout, Limit: limit, StderrTail: tailText, Err: err}
	}
	// ctxErr classifies a failure that happened while ctx was done.
	ctxErr := func(ctx context.Context, tailText string) *CallError {
		if errors.Is(context.Cause(ctx), errTimedOut) {
			return fail(KindTimeout, "", context.DeadlineExceeded, tailText)
		}
		return fail(KindCanceled, "", context.Cause(ctx), tailText)
	}

	callCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()

	if err := r.checkMounts(callCtx, s); err != nil {
		if callCtx.Err() != nil {
			return nil, ctxErr(callCtx, "")
		}
		return nil, fail(KindEngine, "create container", err, "")
	}
	cfg, hc := r.containerConfig(s)
	created, err := r.create(callCtx, cfg, hc)
	if err != nil {
		if callCtx.Err() != nil {
			return nil, ctxErr(callCtx, "")
		}
		if client.IsErrNotFound(err) {
			return nil, fail(KindEngine, "create container", fmt.Errorf("%w (gcompose never pulls; build it (make images) or docker load it)", err), "")
		}
		return nil, fail(KindEngine, "create container", explainCreate(err, s), "")
	}
	id := created.ID
	// Removal runs whatever happened, on a context that outlives the call's,
	// and is bounded too: a hung engine must not hang the clean-up. A
	// container it could not remove is named in the error (or, after a
	// success, in a warning) so that it is never a silent orphan.
	defer func() {
		rmErr := r.removeDetached(ctx, id)
		if rmErr == nil {
			return
		}
		var ce *CallError
		if errors.As(err, &ce) {
			ce.Leftover = shortID(id)
			ce.LeftoverErr = rmErr
			return
		}
		r.log.Warn("an adapter container could not be removed; the next run holding this application's state lock removes it, or remove it yourself (docker rm -f "+shortID(id)+")",
			"container", shortID(id), "resource", s.Resource, "call", s.Call, "err", rmErr)
	}()

	hj, err := r.attach(callCtx, id)
	if err != nil {
		if callCtx.Err() != nil {
			return nil, ctxErr(callCtx, "")
		}
		return nil, fail(KindEngine, "attach container", err, "")
	}
	// On timeout or cancel, closing the hijacked connection unblocks the
	// copy and the stdin writer; the deferred removal kills the container.
	stopWatch := context.AfterFunc(callCtx, hj.Close)
	defer stopWatch()
	defer hj.Close()

	if err := r.start(callCtx, id); err != nil {
		if callCtx.Err() != nil {
			return nil, ctxErr(callCtx, "")
		}
		return nil, fail(KindEngine, "start container", err, "")
	}

	// Ask for the exit code now, so that the answer is on its way while the
	// adapter runs (it saves a round trip after the streams end).
	type exitStatus struct {
		code int64
		err  error
	}
	exited := make(chan exitStatus, 1)
	// Only the wait's answer is bounded by EngineTimeout: its body comes
	// when the container exits, which the call's timeout bounds.
	waitCtx, answered, hung, stopWait := enginecall.Handshake(callCtx, r.cli.DaemonHost(), "ContainerWait", shortID(id), r.opts.EngineTimeout)
	defer stopWait()
	go func() {
		waitC, errC := r.cli.ContainerWait(waitCtx, id, container.WaitConditionNotRunning)
		answered()
		select {
		case w := <-waitC:
			if w.Error != nil && w.Error.Message != "" {
				exited <- exitStatus{err: errors.New(w.Error.Message)}
				return
			}
			exited <- exitStatus{code: w.StatusCode}
		case err := <-errC:
			exited <- exitStatus{err: hung(err)}
		}
	}()

	stdinDone := make(chan error, 1)
	go func() {
		var err error
		if len(s.Stdin) > 0 {
			_, err = hj.Conn.Write(s.Stdin)
		}
		if cerr := hj.CloseWrite(); err == nil {
			err = cerr
		}
		stdinDone <- err
	}()

	stdout := &limitedBuffer{limit: limit}
	var stdoutW io.Writer = stdout
	if s.StdoutLine != nil {
		stdoutW = &stdoutLines{buf: stdout, fn: s.StdoutLine}
	}
	tl := &tail{max: StderrTailSize}
	stderr := &lineWriter{w: s.Stderr, prefix: "[" + s.Resource + "] ", tail: tl}
	_, copyErr := stdcopy.StdCopy(stdoutW, stderr, hj.Reader)
	stderr.flush()
	hj.Close()
	stdinErr := <-stdinDone

	switch {
	case errors.Is(copyErr, errStdoutLimit):
		return nil, fail(KindStdoutLimit, "", copyErr, tl.String())
	case callCtx.Err() != nil:
		return nil, ctxErr(callCtx, tl.String())
	case copyErr != nil:
		return nil, fail(KindEngine, "read output", copyErr, tl.String())
	}

	st := <-exited
	if st.err != nil {
		if callCtx.Err() != nil {
			return nil, ctxErr(callCtx, tl.String())
		}
		return nil, fail(KindEngine, "wait container", st.err, tl.String())
	}
	exit := st.code
	if stdinErr != nil {
		// An adapter may exit without reading its input; that is its business.
		r.log.Debug("adapter did not take all of stdin", "resource", s.Resource, "call", s.Call, "err", stdinErr)
	}
	res = &Result{ContainerID: id, Stdout: stdout.buf.Bytes(), StderrTail: tl.String(), ExitCode: int(exit), Duration: time.Since(start)}
	if exit != 0 {
		e := fail(KindExit, "", nil, res.StderrTail)
		e.ExitCode = int(exit)
		return res, e
	}
	return res, nil
}

func (r *Runner) containerConfig(s Spec) (*container.Config, *container.HostConfig) {
	labels := make(map[string]string, len(r.opts.Labels)+len(s.Labels)+4)
	for k, v := range r.opts.Labels {
		labels[k] = v
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "true"
	labels[LabelApp] = s.App
	labels[LabelResource] = s.Resource
	labels[LabelCall] = s.Call
	r.mu.Lock()
	if o := r.owner; o != nil && o.app == s.App {
		labels[LabelLock] = o.lockID
		labels[LabelLockScope] = o.scope
	}
	r.mu.Unlock()

	network := s.Network
	if network == "" {
		network = "none"
	}
	memory := s.Memory
	if memory <= 0 {
		memory = r.opts.Memory
	}
	cpus := s.CPUs
	if cpus <= 0 {
		cpus = r.opts.CPUs
	}
	pids := int64(DefaultPids)

	cfg := &container.Config{
		Image:           s.Image,
		Cmd:             s.Args,
		AttachStdin:     true,
		AttachStdout:    true,
		AttachStderr:    true,
		OpenStdin:       true,
		StdinOnce:       true,
		Labels:          labels,
		NetworkDisabled: network == "none",
	}
	if len(s.Entrypoint) > 0 {
		cfg.Entrypoint = s.Entrypoint
	}
	if cfg.Cmd == nil {
		// An empty, non-nil command overrides the image's CMD: "no args".
		cfg.Cmd = []string{}
	}
	mounts := make([]mount.Mount, 0, len(s.Mounts))
	for _, m := range s.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.HostPath, Target: m.ContainerPath, ReadOnly: m.ReadOnly})
	}
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(network),
		AutoRemove:     false,
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs:          map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=" + DefaultTmpfsSize},
		Mounts:         mounts,
		LogConfig:      container.LogConfig{Type: "none"},
		Resources: container.Resources{
			Memory:     memory,
			MemorySwap: memory,
			NanoCPUs:   int64(cpus * 1e9),
			PidsLimit:  &pids,
			Ulimits:    Ulimits(),
		},
	}
	return cfg, hc
}

// DefaultResources are the memory, CPU and process limits of an adapter
// container with the defaults. Containers adapters start to outlive a run
// (the Golem payments keeper, local proxies) get the same.
func DefaultResources() container.Resources {
	pids := int64(DefaultPids)
	return container.Resources{Memory: DefaultMemory, MemorySwap: DefaultMemory, NanoCPUs: int64(DefaultCPUs * 1e9), PidsLimit: &pids, Ulimits: Ulimits()}
}

// Resource limits every adapter container gets, set explicitly because an
// engine's own choice may be one its runtime cannot apply: Podman asks for
// 1048576 open files and processes, which a root without CAP_SYS_RESOURCE
// (a rootless engine, many CI sandboxes) cannot raise to, and every call
// then fails. These are the kernel's own defaults, below any hard limit an
// engine runs with, so lowering to them needs no privilege.
const (
	NofileSoft = 1024
	NofileHard = 4096
	// Nproc counts the processes of the container's user across the user
	// namespace; the PID limit (DefaultPids) bounds the container itself.
	Nproc = 1024
)

// Ulimits are the open-file and process limits of an adapter container.
func Ulimits() []*container.Ulimit {
	return []*container.Ulimit{
		{Name: "nofile", Soft: NofileSoft, Hard: NofileHard},
		{Name: "nproc", Soft: Nproc, Hard: Nproc},
	}
}

// ImageID resolves an image reference to its local image ID. A missing image
// is an error saying how to get it: gcompose never pulls, adapter images are
// built or loaded locally.
func (r *Runner) ImageID(ctx context.Context, ref string) (string, error) {
	ins, err := r.imageInspect(ctx, ref)
	if client.IsErrNotFound(err) && localName(ref) != "" {
		ins, err = r.imageInspect(ctx, localName(ref))
	}
	if err == nil {
		return ins.ID, nil
	}
	if !client.IsErrNotFound(err) {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return "", fmt.Errorf("image %s not found locally; build it (make images) or docker load it — gcompose never pulls", ref)
}

// localName is the name Podman gives an image built or tagged without a
// registry in its name: gcompose/x:dev is localhost/gcompose/x:dev there,
// and keeps that name when saved and loaded into Docker. "" when ref names
// a registry, a digest or an ID.
func localName(ref string) string {
	if strings.HasPrefix(ref, "sha256:") || strings.Contains(ref, "@") {
		return ""
	}
	if first, _, ok := strings.Cut(ref, "/"); ok && (first == "localhost" || strings.ContainsAny(first, ".:")) {
		return ""
	}
	return "localhost/" + ref
}

// create creates the container of cfg, under the image's localhost/ name
// when the engine knows it only by that (localName).
// Each create carries a nonce (LabelCreate): when the call is cancelled
// after the engine got the request, what it made is removed by it at once.
func (r *Runner) create(ctx context.Context, cfg *container.Config, hc *container.HostConfig) (created container.CreateResponse, err error) {
	cfg, nonce := withNonce(cfg)
	var sent atomic.Bool
	defer func() {
		if createdUnknown(ctx, err, sent.Load()) {
			r.removeCreated(ctx, cfg, nonce)
		}
	}()
	containerCreate := func(cfg *container.Config) (container.CreateResponse, error) {
		return enginecall.Get(traceSent(ctx, &sent), r.cli.DaemonHost(), "ContainerCreate", "a container of image "+cfg.Image, r.opts.EngineTimeout,
			func(ctx context.Context) (container.CreateResponse, error) {
				return r.cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
			})
	}
	created, err = containerCreate(cfg)
	if client.IsErrNotFound(err) && localName(cfg.Image) != "" {
		if _, ierr := r.imageInspect(ctx, localName(cfg.Image)); ierr == nil {
			alt := *cfg
			alt.Image = localName(cfg.Image)
			created, err = containerCreate(&alt)
		}
	}
	if err == nil {
		r.checkLimits(ctx, created.ID, hc)
	}
	return created, err
}

// explainCreate says why an engine refused to create a container when the
// engine's own words do not: Podman's Docker API turns each mount back
// into a "type=bind,source=...,target=..." option string and parses it
// again (cmd/podman/common/create_opts.go, containers/podman#8557), so a
// source path holding a comma reads as a mount option and the create
// fails with "invalid mount option"; Docker mounts such a path.
func explainCreate(err error, s Spec) error {
	if !strings.Contains(err.Error(), "invalid mount option") {
		return err
	}
	for _, m := range s.Mounts {
		if strings.Contains(m.HostPath, ",") {
			return fmt.Errorf("%w: the engine (Podman) cannot mount %s, whose path holds a comma (its Docker API reads a comma in a mount's source as an option separator, containers/podman#13922): move or rename it", err, m.HostPath)
		}
	}
	return err
}
