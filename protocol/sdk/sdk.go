// Package sdk lets an adapter author write three things — an init answer, a
// state function and named action functions — instead of a main. It speaks
// the wire protocol of docs/protocol.md: it dispatches on the arguments the
// container was started with, reads the request from stdin, writes the
// answer to stdout, logs to stderr, and exits non-zero with the error on
// stderr when a call fails. The same adapter also runs as a long-lived
// server (args "serve") without any change to its code.
//
//	func main() {
//		sdk.Main(sdk.Adapter{
//			Init:    sdk.Static(protocol.InitResult{...}),
//			State:   state,
//			Actions: map[string]sdk.ActionFunc{"create": create},
//		})
//	}
package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/gcompose/gcompose/protocol"
)

// Arguments the SDK dispatches on. init has none (Deployster runs init with
// the image's default entrypoint and no args).
const (
	// StateArg is the state call's only argument; the SDK puts it in the
	// init answer's state_action unless the adapter set one itself.
	StateArg = "state"
	// ActionArg, followed by the action's name, runs that action; the SDK
	// fills these args into every action of a STALE answer that names
	// neither image, entrypoint nor args.
	ActionArg = "action"
	// ServeArg runs the adapter as a server of JSON-line requests.
	ServeArg = protocol.ServeArg
	// SweepArg runs the sweep call (offered when Adapter.Sweep is set).
	SweepArg = protocol.SweepArg
	// CheckArg runs the check call (offered when Adapter.Check is set).
	CheckArg = protocol.CheckArg
)

// ActionFunc performs one action. What it prints to req.Out() is shown to
// the user; it reports identifying attributes with req.ReportIdentity.
type ActionFunc func(ctx context.Context, req *Request) error

// Adapter is what an adapter author provides.
type Adapter struct {
	// Init answers the init call; use Static for a fixed answer. The SDK
	// fills in the gcompose member (protocol version, serve) and a default
	// state_action (args ["state"]).
	Init func(ctx context.Context) (protocol.InitResult, error)
	// State answers the state call: VALID with the state, or STALE with the
	// actions (by name) that make it so. Check req.Desired(): Absent means
	// the resource must be removed.
	State func(ctx context.Context, req *Request) (*protocol.StateResult, error)
	// Actions by name.
	Actions map[string]ActionFunc
	// Sweep answers the sweep call: find what this adapter made for the
	// application (tagged with req.App() and req.Lineage()) that none of
	// req.SweepRequest().Known names, and terminate it when Terminate is
	// set (else only report it). An object tagged with another lineage is
	// only ever reported; one tagged with a known resource's pending
	// operation is left alone (that resource's next state call adopts or
	// removes it). nil: the adapter does not offer sweep (the SDK says so
	// in the init answer).
	Sweep func(ctx context.Context, req *Request) (*protocol.SweepResult, error)
	// Check answers the check call gcompose makes once per adapter type
	// before planning: can the adapter work at all with what it was given
	// (req.Env: its API reachable, its credentials accepted)? Return the
	// problem in one line for people; the SDK answers {"ok": false,
	// "problem": ...}. nil: the adapter does not offer check.
	Check func(ctx context.Context, req *Request) error
	// NoServe keeps the adapter out of serve mode (the init answer will not
	// offer it), e.g. when its actions must run in separate containers.
	NoServe bool
	// NoActionState keeps the init answer from offering action_state. By
	// default the last action of a STALE answer ends, when gcompose asks,
	// with what State answers right after it (the SDK calls State in the
	// same process, with the request gcompose's verifying state call would
	// send), which saves gcompose that call. Set it when State must not run
	// in the action's container.
	NoActionState bool
	// DeleteGrace is how long a served adapter lets delete actions in
	// flight run on once gcompose is gone (its stdin closed), before it
	// cancels them too; every other call is cancelled at once, so that a
	// create rolls back. 0: DefaultDeleteGrace.
	DeleteGrace time.Duration
	// Stop, when set, is called once the adapter has answered its last
	// call (serve: its stdin closed and every call ended; otherwise after
	// the one call), before Run returns: what the adapter keeps across
	// calls (a market subscription) is ended there rather than left to
	// expire with the process gone.
	Stop func(ctx context.Context)
}

// DefaultDeleteGrace bounds how long deletes run on after gcompose left.
const DefaultDeleteGrace = 2 * time.Minute

// CleanupTimeout bounds the cleanup a cancelled action does (CleanupContext).
const CleanupTimeout = time.Minute

// CleanupContext is the context for an action's cleanup once its own ctx is
// done (gcompose went away or interrupted it): a create that made
// something must remove it, which needs a context that is not cancelled,
// yet bounded (CleanupTimeout) so the adapter still ends. Call cancel when
// the cleanup is over.
//
//	if err := provision(ctx, id); err != nil {
//		cctx, cancel := sdk.CleanupContext(ctx)
//		defer cancel()
//		return errors.Join(err, destroy(cctx, id))
//	}
func CleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
}

// Static returns an Init function that always answers r.
func Static(r protocol.InitResult) func(context.Context) (protocol.InitResult, error) {
	return func(context.Context) (protocol.InitResult, error) { return r, nil }
}

// Main runs the adapter as the container's main and exits with its status.
func Main(a Adapter) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := Run(ctx, a, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run is Main without the process: it dispatches on args, reads stdin,
// writes the answer to stdout and diagnostics to stderr, and returns the
// exit status. Tests call it in-process.
func Run(ctx context.Context, a Adapter, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	inv, err := parseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 2
	}
	if a.Stop != nil {
		defer a.Stop(context.WithoutCancel(ctx))
	}
	if inv.call == ServeArg {
		if err := a.serve(ctx, stdin, stdout, stderr); err != nil {
			fmt.Fprintf(stderr, "error: serve: %v\n", err)
			return 1
		}
		return 0
	}
	raw, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "error: read request: %v\n", err)
		return 1
	}
	var req protocol.Request
	if len(bytes.TrimSpace(raw)) > 0 { // Deployster always sends one; be kind to a bare `docker run`
		if err := json.Unmarshal(raw, &req); err != nil {
			fmt.Fprintf(stderr, "error: request on stdin is not valid JSON: %v\n", err)
			return 1
		}
	}
	// An action's free text goes to stdout; a state or init call's stdout
	// holds the answer only, so anything the adapter prints goes to stderr.
	out := stderr
	if inv.call == protocol.CallAction {
		out = stdout
	}
	var v *protocol.Validator
	if inv.call != protocol.CallAction {
		if v, err = protocol.NewValidator(); err != nil {
			fmt.Fprintf(stderr, "error: %v\n", err)
			return 1
		}
	}
	result, err := a.handle(ctx, v, inv, req, out, stderr, newLogger(stderr, req.Verbose), nil)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	if result != nil {
		if _, err := stdout.Write(append(result, '\n')); err != nil {
			fmt.Fprintf(stderr, "error: write answer: %v\n", err)
			return 1
		}
	}
	return 0
}

// invocation is what the container was asked to do.
type invocation struct {
	call   string // protocol.CallInit, CallState, CallAction, or ServeArg
	action string
}

func parseArgs(args []string) (invocation, error) {
	switch {
	case len(args) == 0:
		return invocation{call: protocol.CallInit}, nil
	case len(args) == 1 && args[0] == StateArg:
		return invocation{call: protocol.CallState}, nil
	case len(args) == 2 && args[0] == ActionArg && args[1] != "":
		return invocation{call: protocol.CallAction, action: args[1]}, nil
	case len(args) == 1 && args[0] == ServeArg:
		return invocation{call: ServeArg}, nil
	case len(args) == 1 && args[0] == SweepArg:
		return invocation{call: protocol.CallSweep}, nil
	case len(args) == 1 && args[0] == CheckArg:
		return invocation{call: protocol.CallCheck}, nil
	}
	return invocation{}, fmt.Errorf("unknown invocation %q: want no args (init), %q, %q NAME, %q, %q or %q", args, StateArg, ActionArg, SweepArg, CheckArg, ServeArg)
}

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// handle answers one call, whichever mode it came in. It returns the JSON
// answer (nil for actions). A panic in adapter code becomes an error, so one
// bad request does not take a served container down.
// report, when set, sends identity reports at once (serve mode with
// streaming); otherwise they are identity lines on out.
//
// errOut is the call's stderr: what State prints when an action answers
// its resource's state goes there.
func (a Adapter) handle(ctx context.Context, v *protocol.Validator, inv invocation, req protocol.Request, out, errOut io.Writer, log *slog.Logger, report func(map[string]any) error) (result []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s call panicked: %v\n%s", inv.call, p, debug.Stack())
		}
	}()
	r := &Request{Request: req, Call: inv.call, Action: inv.action, Log: log, out: out, report: report}
	switch inv.call {
	case protocol.CallInit:
		raw, err := a.init(ctx)
		return checked(raw, err, v.ValidateInitResult)
	case protocol.CallState:
		raw, err := a.state(ctx, r)
		return checked(raw, err, v.ValidateStateResult)
	case protocol.CallSweep:
		raw, err := a.sweep(ctx, r)
		return checked(raw, err, v.ValidateSweepResult)
	case protocol.CallCheck:
		raw, err := a.check(ctx, r)
		return checked(raw, err, v.ValidateCheckResult)
	case protocol.CallAction:
		fn, ok := a.Actions[inv.action]
		if !ok {
			return nil, fmt.Errorf("unknown action %q", inv.action)
		}
		if err := fn(ctx, r); err != nil {
			return nil, fmt.Errorf("action %s: %w", inv.action, err)
		}
		if a.answersState(req) {
			a.answerState(ctx, v, r, errOut)
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown call %q", inv.call)
}

// answersState says whether an action request asks for the resource's
// state at its end and the adapter offers it.
func (a Adapter) answersState(req protocol.Request) bool {
	return !a.NoActionState && a.State != nil && req.Gcompose != nil && req.Gcompose.AnswerState
}

// answerState ends a successful action with the StatePrefix line: what
// State answers now, asked as gcompose's verifying state call would ask.
// When State fails or its answer breaks the protocol, the line is left
// out and gcompose makes the state call itself, which reports the problem
// as it always has.
func (a Adapter) answerState(ctx context.Context, v *protocol.Validator, r *Request, errOut io.Writer) {
	sr := &Request{Request: r.verifyRequest(), Call: protocol.CallState, Log: r.Log, out: errOut}
	raw, err := a.state(ctx, sr)
	if err == nil && v == nil {
		v, err = protocol.NewValidator()
	}
	if err == nil {
		_, err = checked(raw, nil, v.ValidateStateResult)
	}
	if err != nil {
		r.Log.Warn("the state after the action is left to gcompose's state call", "err", err)
		return
	}
	if _, err := fmt.Fprintf(r.out, "%s%s\n", protocol.StatePrefix, raw); err != nil {
		r.Log.Warn("writing the state after the action", "err", err)
	}
}

// checked validates an answer before it goes out, so an adapter bug is
// reported by the adapter, naming the field, rather than as a protocol error.
func checked(raw []byte, err error, validate func([]byte) error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if err := validate(raw); err != nil {
		return nil, fmt.Errorf("the adapter's answer breaks the protocol: %w", err)
	}
	return raw, nil
}

func (a Adapter) init(ctx context.Context) ([]byte, error) {
	if a.Init == nil {
		return nil, errors.New("init: the adapter has no Init")
	}
	res, err := a.Init(ctx)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	sa := &res.StateAction
	if sa.Image == "" && sa.Entrypoint == "" && sa.Args == nil {
		sa.Args = []string{StateArg}
	}
	ext := protocol.InitExt{}
	if res.Gcompose != nil {
		ext = *res.Gcompose
	}
	ext.Protocol = protocol.Version
	ext.Serve = !a.NoServe
	ext.Sweep = a.Sweep != nil
	ext.Check = a.Check != nil
	ext.ActionState = !a.NoActionState && a.State != nil
	res.Gcompose = &ext
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("init: encode answer: %w", err)
	}
	return raw, nil
}

// check turns the adapter's verdict into the check answer: a problem is an
// answer, not a failed call.
func (a Adapter) check(ctx context.Context, r *Request) ([]byte, error) {
	if a.Check == nil {
		return nil, errors.New("check: the adapter does not offer check")
	}
	res := protocol.CheckResult{OK: true}
	if err := a.Check(ctx, r); err != nil {
		res = protocol.CheckResult{Problem: strings.TrimSpace(err.Error())}
		if res.Problem == "" {
			res.Problem = "failed"
		}
	}
	return json.Marshal(res)
}

func (a Adapter) sweep(ctx context.Context, r *Request) ([]byte, error) {
	if a.Sweep == nil {
		return nil, errors.New("sweep: the adapter does not offer sweep")
	}
	if r.SweepRequest() == nil {
		return nil, errors.New("sweep: the request carries no sweep question (gcompose.sweep)")
	}
	res, err := a.Sweep(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	if res == nil {
		res = &protocol.SweepResult{}
	}
	if res.Found == nil {
		res.Found = []protocol.Orphan{}
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("sweep: encode answer: %w", err)
	}
	return raw, nil
}

func (a Adapter) state(ctx context.Context, r *Request) ([]byte, error) {
	if a.State == nil {
		return nil, errors.New("state: the adapter has no State")
	}
	res, err := a.State(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if res == nil {
		return nil, errors.New("state: the adapter answered nothing")
	}
	switch res.Status {
	case protocol.Valid:
	case protocol.Stale:
		if len(res.Actions) == 0 {
			return nil, errors.New("state: a STALE answer needs at least one action")
		}
		actions := make([]protocol.ActionSpec, len(res.Actions))
		for i, act := range res.Actions {
			if act.Image == "" && act.Entrypoint == "" && act.Args == nil {
				if _, ok := a.Actions[act.Name]; !ok {
					return nil, fmt.Errorf("state: answer names action %q, which the adapter does not define", act.Name)
				}
				act.Args = []string{ActionArg, act.Name}
			}
			actions[i] = act
		}
		res.Actions = actions
	default:
		return nil, fmt.Errorf("state: status %q, want %q or %q", res.Status, protocol.Valid, protocol.Stale)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("state: encode answer: %w", err)
	}
	return raw, nil
}
