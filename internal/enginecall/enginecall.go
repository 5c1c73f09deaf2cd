// Package enginecall bounds the calls gcompose and the devnet make to a Docker Engine, so that an engine
// that accepts connections but never answers (dockerd 20.10 deadlocked in libnetwork, moby/moby#46661)
// gives an error that names the call, the engine and what to do, instead of a process that hangs for
// ever.
//
// What is bounded is the request/response exchange: the time the engine takes to answer. A call whose
// answer is a stream that legitimately lasts (an attached container's output, the body of a wait that
// ends when the container exits, a build's progress) is bounded up to its answer's start only; the
// stream's own duration is the caller's to bound.
package enginecall

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultBound is how long an engine may take to answer one call before it is taken for hung. Generous:
// a loaded engine (a parallel deploy of dozens of containers on two cores) answers a create or a removal
// in seconds, a healthy one never in minutes.
const DefaultBound = 2 * time.Minute

// ErrHung is what every *HungError matches with errors.Is.
var ErrHung = errors.New("the docker engine did not answer")

// HungError says that the engine did not answer a call in time.
type HungError struct {
	// Host is the engine's address (DOCKER_HOST, or the default socket).
	Host string
	// Call is the Engine API call (ContainerRemove, NetworkList, ...).
	Call string
	// Target is what the call was about (a container or network name or ID); may be empty.
	Target string
	// Bound is how long the answer was waited for.
	Bound time.Duration
}

func (e *HungError) Error() string {
	what := e.Call
	if e.Target != "" {
		what += " for " + e.Target
	}
	return fmt.Sprintf("docker engine at %s did not answer %s within %s: the engine may be hung "+
		"(dockerd 20.10 can deadlock in its network code, moby/moby#46661; `docker network ls` hanging confirms it; "+
		"restarting dockerd clears it; docs/engines.md)", e.Host, what, e.Bound)
}

// Short is the error without the advice, for a second hang in one message.
func (e *HungError) Short() string {
	what := e.Call
	if e.Target != "" {
		what += " for " + e.Target
	}
	return fmt.Sprintf("the engine did not answer %s within %s either", what, e.Bound)
}

// Is makes errors.Is(err, ErrHung) hold.
func (e *HungError) Is(target error) bool { return target == ErrHung }

// errBound is the cause of a call's context when its bound, not its caller, ended it.
var errBound = errors.New("engine call bound reached")

// Call runs one request/response exchange fn with the engine at host, on a context that ends after bound
// (0: DefaultBound). If the bound ends it, the error is a *HungError; if ctx ends first, fn's own error
// (the caller's timeout or cancellation) is returned as is.
func Call(ctx context.Context, host, call, target string, bound time.Duration, fn func(context.Context) error) error {
	if bound <= 0 {
		bound = DefaultBound
	}
	cctx, cancel := context.WithTimeoutCause(ctx, bound, errBound)
	defer cancel()
	err := fn(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errBound) {
		return &HungError{Host: host, Call: call, Target: target, Bound: bound}
	}
	return err
}

// Get is Call for a call that returns a value.
func Get[T any](ctx context.Context, host, call, target string, bound time.Duration, fn func(context.Context) (T, error)) (T, error) {
	var v T
	err := Call(ctx, host, call, target, bound, func(ctx context.Context) error {
		var err error
		v, err = fn(ctx)
		return err
	})
	return v, err
}

// Handshake bounds the start of a call whose answer is a stream that may last (ContainerWait, an
// attach): it returns a context for the whole call, which the bound ends unless answered is called
// first, and hung, which turns the error of a call the bound ended into a *HungError. Call answered as
// soon as the engine's answer has started (the call returned its stream); cancel when the stream is
// done.
func Handshake(ctx context.Context, host, call, target string, bound time.Duration) (cctx context.Context, answered func(), hung func(error) error, cancel context.CancelFunc) {
	if bound <= 0 {
		bound = DefaultBound
	}
	cctx, cancelCause := context.WithCancelCause(ctx)
	timer := time.AfterFunc(bound, func() { cancelCause(errBound) })
	answered = func() { timer.Stop() }
	hung = func(err error) error {
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errBound) {
			return &HungError{Host: host, Call: call, Target: target, Bound: bound}
		}
		return err
	}
	cancel = func() {
		timer.Stop()
		cancelCause(context.Canceled)
	}
	return cctx, answered, hung, cancel
}
