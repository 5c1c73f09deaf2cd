package graph

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Status is what happened to one vertex during a walk.
type Status int

const (
	// Skipped: not started, because a vertex it depends on failed (Cause
	// names it) or the walk was cancelled (Err holds the context's error).
	Skipped Status = iota
	Done
	Failed
)

func (s Status) String() string {
	switch s {
	case Done:
		return "done"
	case Failed:
		return "failed"
	default:
		return "skipped"
	}
}

// Outcome is one vertex's result.
type Outcome struct {
	Status Status
	// Err is the callback's error for Failed, the context's error for a
	// vertex skipped by cancellation.
	Err error
	// Cause is the failed vertex that made this one Skipped (the root failure,
	// even when the vertex depends on it only transitively).
	Cause string
	// Start and End bracket the callback for Done and Failed vertices.
	Start, End time.Time
}

func (o Outcome) String() string {
	switch {
	case o.Status == Failed:
		return fmt.Sprintf("failed: %v", o.Err)
	case o.Status == Skipped && o.Cause != "":
		return fmt.Sprintf("skipped because %s failed", o.Cause)
	case o.Status == Skipped && o.Err != nil:
		return fmt.Sprintf("skipped: %v", o.Err)
	default:
		return o.Status.String()
	}
}

// WalkResult holds the outcome of every vertex.
type WalkResult struct {
	Outcomes map[string]Outcome
}

// Failed returns the IDs of the vertices whose callback failed, sorted by ID.
func (r *WalkResult) Failed() []string { return r.with(Failed) }

// Skipped returns the IDs of the vertices that were not started, sorted.
func (r *WalkResult) Skipped() []string { return r.with(Skipped) }

func (r *WalkResult) with(s Status) []string {
	var out []string
	for id, o := range r.Outcomes {
		if o.Status == s {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// WalkFunc does the work of one vertex.
type WalkFunc func(ctx context.Context, id string) error

// Walk calls fn for every vertex, starting a vertex as soon as every vertex
// it depends on has finished successfully (reverse: as soon as every vertex
// that depends on it has, as destroy needs), with at most parallelism calls
// at once (<= 0 means 1). When a call fails, nothing that depends on the
// failed vertex, directly or not, is started; independent branches run to
// the end. When ctx is cancelled no new call starts; running calls see the
// cancelled ctx. Ready vertices start in ID order.
//
// The result holds every vertex's outcome. The error joins every failure
// (each wrapped with its vertex ID) and the context's error if the walk was
// cut short; it is a *CycleError, with a nil result, for a cyclic graph.
func Walk(ctx context.Context, g *Graph, parallelism int, reverse bool, fn WalkFunc) (*WalkResult, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	if parallelism <= 0 {
		parallelism = 1
	}
	n := len(g.verts)
	waitOn, release := g.deps, g.rdeps // waitOn[v]: what v waits for; release[v]: who waits for v
	if reverse {
		waitOn, release = g.rdeps, g.deps
	}
	pending := make([]int, n)
	ready := &rankHeap{rank: g.rank()}
	for v := 0; v < n; v++ {
		pending[v] = len(waitOn[v])
		if pending[v] == 0 {
			ready.items = append(ready.items, v)
		}
	}
	heap.Init(ready)

	const unset, started = Status(-1), Status(-2)
	status := make([]Status, n)
	for i := range status {
		status[i] = unset
	}
	outcomes := make([]Outcome, n)
	type result struct {
		v          int
		err        error
		start, end time.Time
	}
	results := make(chan result, parallelism)
	running, finished := 0, 0
	var errs []error

	// skip marks everything waiting (transitively) on v as skipped because
	// of cause. None of those can have started: they wait on v.
	skip := func(v int, cause string) {
		stack := append([]int(nil), release[v]...)
		for len(stack) > 0 {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if status[w] != unset {
				continue
			}
			status[w] = Skipped
			outcomes[w] = Outcome{Status: Skipped, Cause: cause}
			finished++
			stack = append(stack, release[w]...)
		}
	}

	for finished < n {
		for running < parallelism && ready.Len() > 0 && ctx.Err() == nil {
			v := heap.Pop(ready).(int)
			if status[v] != unset { // skipped after it became ready
				continue
			}
			status[v] = started
			running++
			go func(v int) {
				start := time.Now()
				err := call(ctx, fn, g.verts[v].ID)
				results <- result{v: v, err: err, start: start, end: time.Now()}
			}(v)
		}
		if running == 0 {
			break // cancelled, or nothing left that can start
		}
		r := <-results
		running--
		finished++
		id := g.verts[r.v].ID
		if r.err != nil {
			status[r.v] = Failed
			outcomes[r.v] = Outcome{Status: Failed, Err: r.err, Start: r.start, End: r.end}
			errs = append(errs, fmt.Errorf("%s: %w", id, r.err))
			skip(r.v, id)
			continue
		}
		status[r.v] = Done
		outcomes[r.v] = Outcome{Status: Done, Start: r.start, End: r.end}
		for _, w := range release[r.v] {
			pending[w]--
			if pending[w] == 0 && status[w] == unset {
				heap.Push(ready, w)
			}
		}
	}
	res := &WalkResult{Outcomes: make(map[string]Outcome, n)}
	cancelled := false
	for v := 0; v < n; v++ {
		if status[v] == unset {
			cancelled = true
			outcomes[v] = Outcome{Status: Skipped, Err: ctx.Err()}
		}
		res.Outcomes[g.verts[v].ID] = outcomes[v]
	}
	if cancelled && ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("walk cancelled: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

// call runs fn, turning a panic into an error so one bad vertex cannot take
// the walk (and the state it records) down.
func call(ctx context.Context, fn WalkFunc, id string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return fn(ctx, id)
}
