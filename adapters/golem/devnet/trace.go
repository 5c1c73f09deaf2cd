package devnet

import (
	"context"
	"slices"
	"sync"
	"time"
)

// ActivityTrace is where an activity's time went on the devnet: when it was created, and per ExeScript
// batch when the requestor posted it and, per command, when the devnet ran it and its engine calls and
// waits. The gaps between the batches are the requestor's; the commands are the provider's (here the
// devnet's). Benchmarks read it (Server.ActivityTraces); it is no part of yagna's API.
type ActivityTrace struct {
	ID      string
	Created time.Time
	Batches []BatchTrace
}

// BatchTrace is one ExeScript batch of an activity.
type BatchTrace struct {
	Posted   time.Time
	Commands []CommandTrace
}

// CommandTrace is one command of a batch: deploy, start, run, ...
type CommandTrace struct {
	Name       string
	Start, End time.Time
	// Steps are its engine calls and waits, in the order they ended (Step.Name: the engine call,
	// "exec" for a run's process from its start to its exit, "vpn ready" for devnet-init's VPN join).
	Steps []Step
}

// Step is one engine call or wait of a command.
type Step struct {
	Name string
	Took time.Duration
}

// Finished is when the batch's last command ended (zero while it runs).
func (b BatchTrace) Finished() time.Time {
	if len(b.Commands) == 0 {
		return time.Time{}
	}
	return b.Commands[len(b.Commands)-1].End
}

// ActivityTraces returns the traces of the activities created since the devnet started.
func (s *Server) ActivityTraces() []ActivityTrace {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ActivityTrace, 0, len(s.activities))
	for _, act := range s.activities {
		t := ActivityTrace{ID: act.id, Created: act.created}
		for _, b := range act.traces {
			t.Batches = append(t.Batches, BatchTrace{Posted: b.Posted, Commands: slices.Clone(b.Commands)})
		}
		out = append(out, t)
	}
	return out
}

// steps collects the steps of the command that runs; a context carries it to the engine calls
// (engine.go call, get), which add themselves.
type steps struct {
	mu   sync.Mutex
	list []Step
}

type stepsKey struct{}

func withSteps(ctx context.Context, st *steps) context.Context {
	return context.WithValue(ctx, stepsKey{}, st)
}

// step adds a step that started at start to the command ctx runs for, if any.
func step(ctx context.Context, name string, start time.Time) {
	st, _ := ctx.Value(stepsKey{}).(*steps)
	if st == nil {
		return
	}
	took := time.Since(start)
	st.mu.Lock()
	st.list = append(st.list, Step{Name: name, Took: took})
	st.mu.Unlock()
}

func (st *steps) take() []Step {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.list)
}
