package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// crashEnv names the environment variable of the crash tests: set to K, the
// process kills itself with SIGKILL right after its K-th adapter call
// returns, before the engine can record the answer: the worst moment. It
// exists so that tests can crash gcompose at every point of a deploy or a
// destroy deterministically; nothing else sets it.
const crashEnv = "GCOMPOSE_TEST_CRASH_AFTER_CALLS"

// crashSignalEnv set to INT makes the crash point a SIGINT instead, as a
// user pressing Ctrl-C at that moment: the process carries on and handles it.
const crashSignalEnv = "GCOMPOSE_TEST_CRASH_SIGNAL"

// withCrashPoint wraps the adapters when crashEnv is set.
func withCrashPoint(a plan.Adapters) plan.Adapters {
	k, err := strconv.Atoi(os.Getenv(crashEnv))
	if err != nil || k <= 0 {
		return a
	}
	return &crashingAdapters{Adapters: a, after: int64(k), interrupt: os.Getenv(crashSignalEnv) == "INT"}
}

type crashingAdapters struct {
	plan.Adapters
	calls     atomic.Int64
	after     int64
	interrupt bool
}

func (c *crashingAdapters) tick() {
	if c.calls.Add(1) == c.after {
		if c.interrupt {
			interruptSelf()
			return
		}
		killSelf()
		select {} // never continue past the crash point
	}
}

func (c *crashingAdapters) State(ctx context.Context, call plan.Call, desired string) (*protocol.StateResult, error) {
	r, err := c.Adapters.State(ctx, call, desired)
	c.tick()
	return r, err
}

func (c *crashingAdapters) Action(ctx context.Context, call plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	r, err := c.Adapters.Action(ctx, call, a, stale)
	c.tick()
	return r, err
}
