// Package memadapter is an in-process adapter for fast engine tests and
// benchmarks: it "creates" resources in a map. It is never the only test of
// the adapter boundary; the Docker-backed adapters are tested for real.
package memadapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// Adapter keeps objects in memory. Each object's outputs are its config plus
// "id" and "generation" (bumped by every create or update).
type Adapter struct {
	// ActionDelay is slept in every action (to model real work).
	ActionDelay time.Duration
	// FailActions makes actions of these resources fail.
	FailActions map[string]bool
	// FailState makes state calls of these resources fail.
	FailState map[string]bool
	// Plain makes the adapter behave like a plain Deployster adapter
	// (no destroy support).
	Plain bool
	// Rebuild lists config keys whose change forces a rebuild.
	Rebuild []string
	// Sweeps makes the adapter offer sweep: every object is tagged with the
	// lineage and operation of the call that created it, and a sweep finds
	// those no known resource names.
	Sweeps bool
	// FailSweep makes sweep calls fail.
	FailSweep bool
	// CheckProblem, when set, makes the adapter offer check and answer it
	// with this problem (by image: a test gives several types one problem
	// or different ones); "" answers OK.
	CheckProblem map[string]string
	// Outputs, when set, are the outputs the adapter declares (init).
	Outputs []string
	// Refuse makes the state calls of these resources (desired present)
	// refuse with the message (protocol.StateExt.Refuse).
	Refuse map[string]string
	// Estimate makes the adapter declare that it estimates (init), so that
	// plan asks the state of a resource whose inputs are known after apply.
	Estimate bool
	// CreateBeforeDestroy makes the adapter declare create_before_destroy
	// (init); its rebuilds then do not change (it holds one object per name).
	CreateBeforeDestroy bool

	mu      sync.Mutex
	objects map[string]map[string]any
	tags    map[string]tag
	gen     int
	log     []string

	StateCalls, ActionCalls, DescribeCalls, SweepCalls, CheckCalls atomic.Int64
}

// tag is what an object is labelled with: the state lineage and operation
// that made it, and the name its adapter received.
type tag struct{ lineage, operation, name string }

// New returns an empty adapter.
func New() *Adapter {
	return &Adapter{objects: map[string]map[string]any{}, tags: map[string]tag{}}
}

func (a *Adapter) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	a.DescribeCalls.Add(1)
	return plan.Capabilities{Destroy: !a.Plain, Outputs: a.Outputs, Estimate: a.Estimate, CreateBeforeDestroy: a.CreateBeforeDestroy}, nil
}

// Objects returns a copy of what exists.
func (a *Adapter) Objects() map[string]map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]map[string]any, len(a.objects))
	for k, v := range a.objects {
		out[k] = maps.Clone(v)
	}
	return out
}

// Log returns "create x", "update y", "delete z" in the order they happened.
func (a *Adapter) Log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.log...)
}

// Tag retags an object, as if the operation op of lineage had created it.
func (a *Adapter) Tag(name, lineage, op string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tags[name] = tag{lineage: lineage, operation: op}
}

// Remove deletes an object behind the engine's back (drift).
func (a *Adapter) Remove(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.objects, name)
	delete(a.tags, name)
}

// Check answers from CheckProblem; without it the adapter has nothing to
// check.
func (a *Adapter) Check(ctx context.Context, c plan.CheckCall) (*protocol.CheckResult, error) {
	if a.CheckProblem == nil {
		return nil, plan.ErrNoCheck
	}
	a.CheckCalls.Add(1)
	if p := a.CheckProblem[c.Type]; p != "" {
		return &protocol.CheckResult{Problem: p}, nil
	}
	return &protocol.CheckResult{OK: true}, nil
}

// Sweep finds the objects tagged with the call's lineage that no known
// resource names (by name with an identity, or by its pending operation)
// and removes them when asked; those of another lineage are reported.
func (a *Adapter) Sweep(ctx context.Context, s plan.SweepCall) (*protocol.SweepResult, error) {
	a.SweepCalls.Add(1)
	if !a.Sweeps || a.Plain {
		return nil, plan.ErrNoSweep
	}
	if a.FailSweep {
		return nil, fmt.Errorf("sweep call: adapter broken on purpose")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	named, pending := map[string]bool{}, map[string]bool{}
	for _, k := range s.Known {
		if k.Identity["id"] != nil {
			named[k.Name] = true
		}
		if k.Pending != nil {
			pending[k.Pending.ID] = true
		}
	}
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	names := make([]string, 0, len(a.objects))
	for n := range a.objects {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := a.tags[n]
		called := t.name // known resources are named as their adapter received them
		if called == "" {
			called = n
		}
		if named[called] || pending[t.operation] {
			continue
		}
		o := protocol.Orphan{Kind: "object", ID: n, Lineage: t.lineage, Resource: called, Action: protocol.OrphanReported, Detail: "created by operation " + t.operation}
		if s.Terminate && t.lineage == s.Lineage && (len(s.Only) == 0 || slices.Contains(s.Only, n)) {
			delete(a.objects, n)
			delete(a.tags, n)
			a.log = append(a.log, "sweep "+n)
			o.Action = protocol.OrphanTerminated
		}
		res.Found = append(res.Found, o)
	}
	return res, nil
}

func (a *Adapter) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	a.StateCalls.Add(1)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.FailState[c.Name] {
		return nil, plan.Named(c.Name, errors.New("state call: adapter broken on purpose"))
	}
	obj, exists := a.objects[c.Name]
	if msg, ok := a.Refuse[c.Name]; ok && desired == protocol.Present {
		ans := stale(protocol.ChangeCreate, "create", "refused", nil)
		ans.Gcompose.Refuse = &protocol.Refusal{Message: msg}
		return ans, nil
	}
	if desired == protocol.Absent {
		if !exists {
			return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{}}, nil
		}
		return stale(protocol.ChangeDelete, "delete", "", nil), nil
	}
	if !exists {
		return stale(protocol.ChangeCreate, "create", "does not exist", nil), nil
	}
	if c.Replace {
		// Asked what the create after the removal will be.
		return stale(protocol.ChangeCreate, "create", "replaced: created anew", nil), nil
	}
	cfg := configOf(obj)
	if !jsonvalue.Equal(cfg, c.Config) {
		var forces []string
		for _, k := range a.Rebuild {
			if !jsonvalue.Equal(cfg[k], c.Config[k]) {
				forces = append(forces, "/"+k)
			}
		}
		if len(forces) > 0 {
			return stale(protocol.ChangeRebuild, "rebuild", "config changed", forces), nil
		}
		return stale(protocol.ChangeUpdate, "update", "config changed", nil), nil
	}
	return &protocol.StateResult{Status: protocol.Valid, State: maps.Clone(obj)}, nil
}

func stale(change, action, reason string, forces []string) *protocol.StateResult {
	return &protocol.StateResult{Status: protocol.Stale, Actions: []protocol.ActionSpec{{Name: action}},
		Gcompose: &protocol.StateExt{Change: change, Reason: reason, Forces: forces}}
}

func (a *Adapter) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, _ json.RawMessage) (*plan.ActionOutcome, error) {
	a.ActionCalls.Add(1)
	if a.ActionDelay > 0 {
		select {
		case <-time.After(a.ActionDelay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.FailActions[c.Name] {
		return nil, fmt.Errorf("%s failed on purpose", act.Name)
	}
	a.log = append(a.log, act.Name+" "+c.Name)
	switch act.Name {
	case "delete":
		delete(a.objects, c.Name)
		delete(a.tags, c.Name)
		return &plan.ActionOutcome{}, nil
	case "create", "update", "rebuild":
		a.gen++
		obj := maps.Clone(c.Config)
		if obj == nil {
			obj = map[string]any{}
		}
		obj["id"] = c.Name
		obj["generation"] = float64(a.gen)
		a.objects[c.Name] = obj
		if c.Operation != nil {
			// Tagged with the name received, as a real adapter labels
			// what it makes; objects stay keyed by address for the tests.
			a.tags[c.Name] = tag{lineage: c.Lineage, operation: c.Operation.ID, name: c.AdapterName}
		}
		identity := map[string]any{"id": c.Name}
		if c.ReportIdentity != nil {
			c.ReportIdentity(identity) // as a real adapter does, before it returns
		}
		return &plan.ActionOutcome{Identity: identity}, nil
	}
	return nil, fmt.Errorf("unknown action %q", act.Name)
}

func configOf(obj map[string]any) map[string]any {
	cfg := maps.Clone(obj)
	delete(cfg, "id")
	delete(cfg, "generation")
	return cfg
}
