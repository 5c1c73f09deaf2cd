package statetest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// neverRefuses is a broken store: its Lock takes the lock even while another
// holder has it (by force-unlocking that holder first).
type neverRefuses struct{ *state.MemoryStore }

func (n neverRefuses) Lock(ctx context.Context, app string, info state.LockInfo) (*state.Lock, error) {
	l, err := n.MemoryStore.Lock(ctx, app, info)
	if !errors.Is(err, state.ErrLocked) {
		return l, err
	}
	held, err := n.MemoryStore.LockInfo(ctx, app)
	if err != nil {
		return nil, err
	}
	if err := n.MemoryStore.ForceUnlock(ctx, app, held.ID); err != nil {
		return nil, err
	}
	return n.MemoryStore.Lock(ctx, app, info)
}

const brokenEnv = "GCOMPOSE_STATETEST_NEVER_REFUSES"

// The suite must be able to fail: run its AcquireWaits against a store whose
// Lock never refuses, in a child process (a failing subtest would fail this
// test too), and require the child to fail for that reason.
func TestAcquireWaitsFailsOnNeverRefusingLock(t *testing.T) {
	if os.Getenv(brokenEnv) == "1" {
		statetest.Run(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
			s := neverRefuses{state.NewMemoryStore()}
			return s, func(*testing.T) state.Store { return s }
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcquireWaitsFailsOnNeverRefusingLock$/^AcquireWaits$", "-test.count=1")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("AcquireWaits against a never-refusing Lock: %v, want it to fail:\n%s", err, out)
	}
	if !strings.Contains(string(out), "before the release") {
		t.Fatalf("AcquireWaits failed, but not because the lock was taken early:\n%s", out)
	}
}
