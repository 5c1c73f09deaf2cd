package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// ContainerAdapters drives adapter images through the protocol client: the
// engine's plan.Adapters for real deployments.
type ContainerAdapters struct {
	Client *Client
	// Plugs are the descriptor's plugs; each call mounts the ones its
	// adapter declared and that apply to the resource.
	Plugs map[string]Plug
}

func (a *ContainerAdapters) Describe(ctx context.Context, image, resource string) (plan.Capabilities, error) {
	info, err := a.Client.Init(ctx, image, resource)
	if err != nil {
		return plan.Capabilities{}, err
	}
	caps := plan.Capabilities{Destroy: info.Ext, Estimate: info.Ext && info.Init.Gcompose != nil && info.Init.Gcompose.Estimate}
	if info.Ext && info.Init.Gcompose != nil {
		caps.Outputs = plan.DeclaredOutputs(info.Init.Gcompose.Outputs)
		caps.CreateBeforeDestroy = info.Init.Gcompose.CreateBeforeDestroy
	}
	return caps, nil
}

func (a *ContainerAdapters) target(c plan.Call) Target {
	return Target{App: c.App, Lineage: c.Lineage, Name: c.Name, AdapterName: c.AdapterName, Image: c.Type, Config: c.Config, Plugs: a.Plugs,
		Operation: c.Operation, ReportIdentity: c.ReportIdentity, Estimate: c.Estimate, AnswerState: c.AnswerState, PlannedCost: c.PlannedCost, Replace: c.Replace,
		CreateBeforeDestroy: c.CreateBeforeDestroy, Refresh: c.Refresh}
}

func (a *ContainerAdapters) Sweep(ctx context.Context, s plan.SweepCall) (*protocol.SweepResult, error) {
	info, err := a.Client.Init(ctx, s.Type, s.Resource)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", plan.ErrNoSweep, err)
	}
	if !info.Ext || !info.Init.Gcompose.Sweep {
		return nil, plan.ErrNoSweep
	}
	t := Target{App: s.App, Lineage: s.Lineage, Name: s.Resource, Image: s.Type, Plugs: a.Plugs}
	return a.Client.Sweep(ctx, t, protocol.SweepRequest{Known: s.Known, Terminate: s.Terminate, Only: s.Only})
}

func (a *ContainerAdapters) Check(ctx context.Context, c plan.CheckCall) (*protocol.CheckResult, error) {
	t := Target{App: c.App, Lineage: c.Lineage, Name: c.Resource, Image: c.Type, Plugs: a.Plugs, Mode: string(c.Mode)}
	res, err := a.Client.Check(ctx, t)
	if errors.Is(err, ErrNothingToCheck) {
		return nil, fmt.Errorf("%w: %w", plan.ErrNoCheck, err)
	}
	return res, err
}

func (a *ContainerAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	return a.Client.State(ctx, a.target(c), desired, c.Persisted)
}

func (a *ContainerAdapters) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	res, err := a.Client.Action(ctx, a.target(c), act, stale, c.Persisted)
	if res == nil {
		return nil, err
	}
	return &plan.ActionOutcome{Output: res.Output, Identity: res.Identity, State: res.State}, err
}

// RunnerCleanup is Engine.Cleanup for the adapter containers r runs: it
// labels what r starts with the held lock, then removes what earlier
// holders of that lock left.
func RunnerCleanup(r *runner.Runner) func(ctx context.Context, l *state.Lock) (int, error) {
	return func(ctx context.Context, l *state.Lock) (int, error) {
		r.Own(l.App, l.Scope, l.Info.ID)
		return r.Cleanup(ctx, l.App)
	}
}

// RunnerExisting is Engine.Existing for the containers r's Engine holds:
// those labelled with the application that are not adapter calls, each
// with the adapter that started it (runner.LabelAdapter), if it says.
func RunnerExisting(r *runner.Runner) func(ctx context.Context, app string) ([]engine.ExistingObject, error) {
	return func(ctx context.Context, app string) ([]engine.ExistingObject, error) {
		cs, err := r.Objects(ctx, app)
		if err != nil {
			return nil, err
		}
		out := make([]engine.ExistingObject, len(cs))
		for i, c := range cs {
			out[i] = engine.ExistingObject{Description: c.Describe(), Adapter: c.Adapter}
		}
		return out, nil
	}
}

// RunnerWarm is Engine.Warm for the protocol client c, whose containers r
// runs, with the descriptor's plugs: it labels what r starts with the held
// lock (as RunnerCleanup does: the servers may start before that returns)
// and starts the type's server.
func RunnerWarm(r *runner.Runner, c *Client, plugs map[string]Plug) func(ctx context.Context, l *state.Lock, typ, resource string) error {
	return func(ctx context.Context, l *state.Lock, typ, resource string) error {
		r.Own(l.App, l.Scope, l.Info.ID)
		return c.Start(ctx, Target{App: l.App, Name: resource, Image: typ, Plugs: plugs})
	}
}
