package enginebench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// imageName names the file adapter image of this package's tests and
// benchmarks; testimage adds the content's hash to its tag (harness.image),
// so that another checkout's run never replaces it.
const imageName = "gcompose/file-adapter:enginebench"

// harness is one Docker-backed setup: the file adapter image, a runner
// labelling its containers for the test, a plug directory and a file state
// store (real fsyncs, as gcompose uses).
type harness struct {
	tb     testing.TB
	ctx    context.Context
	runner *runner.Runner
	count  *countingRunner
	v      adapter.Validator
	files  string // the "files" plug
	store  *state.FileStore
	cache  string // init cache directory shared by the runs of the harness
	image  string // the file adapter image's reference
}

func newHarness(tb testing.TB, timeout time.Duration) *harness {
	tb.Helper()
	testimage.RequireDocker(tb)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	image := testimage.Image(tb, ctx, "./cmd/file-adapter", imageName)
	labels := testimage.Labels(tb)
	r, err := runner.New(ctx, runner.Options{Labels: labels, Timeout: 2 * time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close() })
	st, err := state.NewFileStore(filepath.Join(tb.TempDir(), "state"), state.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	v, err := protocol.NewValidator()
	if err != nil {
		tb.Fatal(err)
	}
	return &harness{tb: tb, ctx: ctx, runner: r, count: &countingRunner{Runner: r}, v: v,
		files: tb.TempDir(), store: st, cache: tb.TempDir(), image: image}
}

// client makes the protocol client of one run (a gcompose process): the
// init cache on disk is the harness's, the in-memory one is new.
func (h *harness) client(noServe bool) *adapter.Client {
	return h.clientWith(h.count, noServe, false)
}

// clientWith is client through runner r; verify never asks an action for
// its resource's state (adapter.Options.NoActionState): the engine then
// verifies every resource with a state call, as before action_state.
func (h *harness) clientWith(r adapter.Runner, noServe, verify bool) *adapter.Client {
	h.tb.Helper()
	c, err := adapter.New(adapter.Options{Runner: r, Validator: h.v, CacheDir: h.cache, Version: "bench", NoServe: noServe, NoActionState: verify})
	if err != nil {
		h.tb.Fatal(err)
	}
	return c
}

func (h *harness) plugs() map[string]adapter.Plug {
	return map[string]adapter.Plug{"files": {Path: h.files}}
}

// engine is the engine of one run through client c, wired as the CLI wires
// it (core/project).
func (h *harness) engine(c *adapter.Client, ad plan.Adapters, release func(context.Context) error, parallelism int) *engine.Engine {
	return &engine.Engine{Adapters: ad, Store: h.store, Parallelism: parallelism, Version: "bench",
		Cleanup: adapter.RunnerCleanup(h.runner), Existing: adapter.RunnerExisting(h.runner), Warm: adapter.RunnerWarm(h.runner, c, h.plugs()),
		Release: release, LockTimeout: time.Minute}
}

// run deploys want through a fresh client (one gcompose run) and returns the
// outcome and the wall time of Engine.Run.
func (h *harness) run(app string, want map[string]*plan.Resource, noServe bool, parallelism int, wrap func(plan.Adapters) plan.Adapters) (*engine.Outcome, time.Duration, error) {
	return h.runWith(app, want, noServe, false, parallelism, wrap)
}

// runWith is run, verifying every resource with a state call when verify.
func (h *harness) runWith(app string, want map[string]*plan.Resource, noServe, verify bool, parallelism int, wrap func(plan.Adapters) plan.Adapters) (*engine.Outcome, time.Duration, error) {
	c := h.clientWith(h.count, noServe, verify)
	var ad plan.Adapters = &adapter.ContainerAdapters{Client: c, Plugs: h.plugs()}
	if wrap != nil {
		ad = wrap(ad)
	}
	e := h.engine(c, ad, c.Close, parallelism)
	start := time.Now()
	out, err := e.Run(h.ctx, engine.Request{App: app, Mode: plan.Deploy, Desired: want})
	return out, time.Since(start), err
}

// fileResources describes n independent file resources files.f0000... at paths
// <prefix>/f0000... whose actions sleep delayMS first.
func (h *harness) fileResources(prefix string, n, delayMS int, content string) map[string]*plan.Resource {
	out := make(map[string]*plan.Resource, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("files.f%04d", i)
		cfg := map[string]any{"path": fmt.Sprintf("%s/f%04d", prefix, i), "content": content}
		if delayMS > 0 {
			cfg["delay_ms"] = delayMS
		}
		out[name] = &plan.Resource{Name: name, Type: h.image, Config: cfg}
	}
	return out
}

// countingRunner counts the containers started, by call (init, state,
// action ..., serve).
type countingRunner struct {
	adapter.Runner
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingRunner) note(call string) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[call]++
	c.mu.Unlock()
}

func (c *countingRunner) Run(ctx context.Context, s runner.Spec) (*runner.Result, error) {
	c.note(s.Call)
	return c.Runner.Run(ctx, s)
}

func (c *countingRunner) Start(ctx context.Context, s runner.Spec) (*runner.Session, error) {
	c.note(s.Call)
	return c.Runner.(adapter.SessionStarter).Start(ctx, s)
}

// take returns the counts so far and starts again from zero.
func (c *countingRunner) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	if out == nil {
		out = map[string]int{}
	}
	c.calls = nil
	return out
}

// countingAdapters counts the engine's calls per resource and kind
// ("describe", "state present", "action create", ...) and the most state
// calls in flight at once. Hold keeps every state call that long, so that
// calls that can overlap do.
type countingAdapters struct {
	plan.Adapters
	Hold time.Duration

	mu       sync.Mutex
	calls    map[string]map[string]int
	inFlight atomic.Int64
	maxState atomic.Int64
}

func (c *countingAdapters) note(resource, kind string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]map[string]int{}
	}
	if c.calls[resource] == nil {
		c.calls[resource] = map[string]int{}
	}
	c.calls[resource][kind]++
}

func (c *countingAdapters) Describe(ctx context.Context, img, resource string) (plan.Capabilities, error) {
	c.note(resource, "describe")
	return c.Adapters.Describe(ctx, img, resource)
}

func (c *countingAdapters) State(ctx context.Context, call plan.Call, desired string) (*protocol.StateResult, error) {
	c.note(call.Name, "state "+desired)
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxState.Load()
		if n <= m || c.maxState.CompareAndSwap(m, n) {
			break
		}
	}
	if c.Hold > 0 {
		time.Sleep(c.Hold)
	}
	return c.Adapters.State(ctx, call, desired)
}

func (c *countingAdapters) Action(ctx context.Context, call plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	c.note(call.Name, "action "+a.Name)
	return c.Adapters.Action(ctx, call, a, stale)
}

// perResource groups resources by their call counts: "describe=1 state
// present=1" -> how many resources had exactly those counts.
func (c *countingAdapters) perResource() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, kinds := range c.calls {
		keys := make([]string, 0, len(kinds))
		for k := range kinds {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := ""
		for _, k := range keys {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s=%d", k, kinds[k])
		}
		out[s]++
	}
	return out
}

// checkFiles fails unless every resource's file holds content.
func checkFiles(tb testing.TB, dir string, want map[string]*plan.Resource) {
	tb.Helper()
	for _, r := range want {
		p := r.Config["path"].(string)
		got, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil || string(got) != r.Config["content"] {
			tb.Fatalf("%s: file %s = %q, %v; want %q", r.Name, p, got, err, r.Config["content"])
		}
	}
}

// deploysterLike drives every resource as Deployster does: a client of its
// own per resource (so init runs once per resource, with no cache, in
// memory or on disk) and one container per call.
type deploysterLike struct {
	h       *harness
	plugs   map[string]adapter.Plug
	mu      sync.Mutex
	clients map[string]*adapter.ContainerAdapters
}

func (h *harness) deploysterLike() *deploysterLike {
	return &deploysterLike{h: h, plugs: h.plugs(), clients: map[string]*adapter.ContainerAdapters{}}
}

func (d *deploysterLike) of(resource string) *adapter.ContainerAdapters {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.clients[resource]; c != nil {
		return c
	}
	c, err := adapter.New(adapter.Options{Runner: d.h.count, Validator: d.h.v, Version: "bench", NoServe: true})
	if err != nil {
		d.h.tb.Fatal(err)
	}
	d.clients[resource] = &adapter.ContainerAdapters{Client: c, Plugs: d.plugs}
	return d.clients[resource]
}

func (d *deploysterLike) Describe(ctx context.Context, img, resource string) (plan.Capabilities, error) {
	return d.of(resource).Describe(ctx, img, resource)
}

func (d *deploysterLike) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	return d.of(c.Name).State(ctx, c, desired)
}

func (d *deploysterLike) Action(ctx context.Context, c plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	return d.of(c.Name).Action(ctx, c, a, stale)
}

// timing measures where a run's time goes: when the lock was held, the
// leftover scan, the scan for existing objects (a first deploy), the state
// load and the servers' start ran; the mean state call, action and state
// write (one journal line, fsynced); when the first state answer came (it
// waits for the server), when the first action started and the last one
// ended, and the compaction and the release of the servers at the end.
type timing struct {
	t0 time.Time

	mu                      sync.Mutex
	states, actions, writes stat
	appends                 stat // written, durable later (state.Appender)
	firstAsk, firstAnswer   time.Duration
	lastAnswer, firstWrite  time.Duration
	firstAction, lastAction time.Duration
	serverStart             time.Duration // the servers' starts, added up
	locked                  time.Duration
	cleanup, existing, load span
	servers                 span // from the first server's start to the last one's end
	compact, release        time.Duration
}

// span is when something ran, since t0.
type span struct{ from, to time.Duration }

func (s span) String() string {
	return fmt.Sprintf("%.1f–%.1f ms", float64(s.from.Microseconds())/1000, float64(s.to.Microseconds())/1000)
}

// ran records into sp that something ran from start until now; the first
// start and the last end when it runs more than once.
func (tm *timing) ran(sp *span, start time.Time) {
	from, to := start.Sub(tm.t0), time.Since(tm.t0)
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if sp.to == 0 || from < sp.from {
		sp.from = from
	}
	sp.to = max(sp.to, to)
}

type stat struct {
	n   int
	sum time.Duration
}

func (s *stat) add(d time.Duration) { s.n++; s.sum += d }

func (s stat) mean() time.Duration {
	if s.n == 0 {
		return 0
	}
	return s.sum / time.Duration(s.n)
}

func (tm *timing) String() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("locked at %s; leftover scan %s, existing objects %s, state load %s, servers starting %s; first state call at %s, answered at %s (served: server start %s), the last answer at %s; first pending operation written from %s; actions from %s to %s; means: state call %s (%d), action %s (%d), state write %s (%d), append %s (%d); compact %s, release %s",
		ms(tm.locked), tm.cleanup, tm.existing, tm.load, tm.servers, ms(tm.firstAsk), ms(tm.firstAnswer), ms(tm.serverStart), ms(tm.lastAnswer), ms(tm.firstWrite), ms(tm.firstAction), ms(tm.lastAction), ms(tm.states.mean()), tm.states.n,
		ms(tm.actions.mean()), tm.actions.n, ms(tm.writes.mean()), tm.writes.n, ms(tm.appends.mean()), tm.appends.n, ms(tm.compact), ms(tm.release))
}

type timedAdapters struct {
	plan.Adapters
	tm *timing
}

func (a timedAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	start := time.Now()
	a.tm.mu.Lock()
	if a.tm.firstAsk == 0 {
		a.tm.firstAsk = start.Sub(a.tm.t0)
	}
	a.tm.mu.Unlock()
	res, err := a.Adapters.State(ctx, c, desired)
	end := time.Since(a.tm.t0)
	a.tm.mu.Lock()
	a.tm.states.add(time.Since(start))
	if a.tm.firstAnswer == 0 {
		a.tm.firstAnswer = end
	}
	a.tm.lastAnswer = max(a.tm.lastAnswer, end)
	a.tm.mu.Unlock()
	return res, err
}

func (a timedAdapters) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	start := time.Now()
	res, err := a.Adapters.Action(ctx, c, act, stale)
	a.tm.mu.Lock()
	a.tm.actions.add(time.Since(start))
	if s := start.Sub(a.tm.t0); a.tm.firstAction == 0 || s < a.tm.firstAction {
		a.tm.firstAction = s
	}
	if e := time.Since(a.tm.t0); e > a.tm.lastAction {
		a.tm.lastAction = e
	}
	a.tm.mu.Unlock()
	return res, err
}

// timedStore times the store's writes. It is a state.Appender when the
// store is, as the CLI's is: hiding Append would make every write of the
// timed runs wait for its fsync, which no gcompose run does.
type timedStore struct {
	state.Store
	tm *timing
}

func (s timedStore) Append(ctx context.Context, l *state.Lock, changes ...state.Change) (func() error, error) {
	a, ok := s.Store.(state.Appender)
	if !ok {
		return nil, fmt.Errorf("state store %T does not append", s.Store)
	}
	start := time.Now()
	durable, err := a.Append(ctx, l, changes...)
	s.tm.mu.Lock()
	s.tm.appends.add(time.Since(start))
	s.tm.mu.Unlock()
	return durable, err
}

func (s timedStore) Apply(ctx context.Context, l *state.Lock, changes ...state.Change) error {
	start := time.Now()
	err := s.Store.Apply(ctx, l, changes...)
	s.tm.mu.Lock()
	if w := start.Sub(s.tm.t0); s.tm.firstWrite == 0 || w < s.tm.firstWrite {
		s.tm.firstWrite = w
	}
	s.tm.writes.add(time.Since(start))
	s.tm.mu.Unlock()
	return err
}

func (s timedStore) Lock(ctx context.Context, app string, info state.LockInfo) (*state.Lock, error) {
	l, err := s.Store.Lock(ctx, app, info)
	s.tm.mu.Lock()
	s.tm.locked = time.Since(s.tm.t0)
	s.tm.mu.Unlock()
	return l, err
}

func (s timedStore) Load(ctx context.Context, app string) (*state.Document, error) {
	defer s.tm.ran(&s.tm.load, time.Now())
	return s.Store.Load(ctx, app)
}

func (s timedStore) Compact(ctx context.Context, l *state.Lock) error {
	start := time.Now()
	err := s.Store.Compact(ctx, l)
	s.tm.mu.Lock()
	s.tm.compact = time.Since(start)
	s.tm.mu.Unlock()
	return err
}

// timedRunner times the start of served containers.
type timedRunner struct {
	*countingRunner
	tm *timing
}

func (r timedRunner) Start(ctx context.Context, s runner.Spec) (*runner.Session, error) {
	start := time.Now()
	sess, err := r.countingRunner.Start(ctx, s)
	r.tm.ran(&r.tm.servers, start)
	r.tm.mu.Lock()
	r.tm.serverStart += time.Since(start)
	r.tm.mu.Unlock()
	return sess, err
}

// timedEngine is the engine of one run through a fresh client whose container
// starts, adapter calls and release are timed into the returned timing.
func (h *harness) timedEngine(noServe, verify bool, parallelism int) (*engine.Engine, *timing) {
	tm := &timing{}
	c := h.clientWith(timedRunner{h.count, tm}, noServe, verify)
	e := h.engine(c, timedAdapters{Adapters: &adapter.ContainerAdapters{Client: c, Plugs: h.plugs()}, tm: tm}, func(ctx context.Context) error {
		start := time.Now()
		err := c.Close(ctx)
		tm.mu.Lock()
		tm.release = time.Since(start)
		tm.mu.Unlock()
		return err
	}, parallelism)
	e.Store = timedStore{Store: h.store, tm: tm}
	cleanup, existing := e.Cleanup, e.Existing
	e.Cleanup = func(ctx context.Context, l *state.Lock) (int, error) {
		defer tm.ran(&tm.cleanup, time.Now())
		return cleanup(ctx, l)
	}
	e.Existing = func(ctx context.Context, app string) ([]engine.ExistingObject, error) {
		defer tm.ran(&tm.existing, time.Now())
		return existing(ctx, app)
	}
	return e, tm
}

// timedRun is run with the time of each part measured.
func (h *harness) timedRun(app string, want map[string]*plan.Resource, noServe, verify bool, parallelism int) (*engine.Outcome, time.Duration, *timing, error) {
	e, tm := h.timedEngine(noServe, verify, parallelism)
	tm.t0 = time.Now()
	out, err := e.Run(h.ctx, engine.Request{App: app, Mode: plan.Deploy, Desired: want})
	return out, time.Since(tm.t0), tm, err
}

func (d *deploysterLike) Check(ctx context.Context, c plan.CheckCall) (*protocol.CheckResult, error) {
	return d.of(c.Resource).Check(ctx, c)
}

func (d *deploysterLike) Sweep(ctx context.Context, s plan.SweepCall) (*protocol.SweepResult, error) {
	return d.of(s.Resource).Sweep(ctx, s)
}

var _ state.Appender = timedStore{}
