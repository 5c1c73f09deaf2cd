package plan

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// Adapters is what the engine needs from adapter images. The Docker-backed
// implementation lives in core/adapter; tests and benchmarks use an in-memory
// one.
type Adapters interface {
	// Describe says what the adapter of an image can do (init, cached).
	Describe(ctx context.Context, image, resource string) (Capabilities, error)
	State(ctx context.Context, c Call, desired string) (*protocol.StateResult, error)
	Action(ctx context.Context, c Call, a protocol.ActionSpec, staleState json.RawMessage) (*ActionOutcome, error)
	// Sweep asks the adapter of an image for what it made for the
	// application that no state names; with Terminate it removes it too.
	// An adapter that does not offer sweep, or cannot say (its init
	// failed, which planning reports), answers an error matching
	// ErrNoSweep.
	Sweep(ctx context.Context, s SweepCall) (*protocol.SweepResult, error)
	// Check asks the adapter of an image, once before planning, whether it
	// can work at all: the environment variables it requires are set, its
	// API answers, its credentials are accepted. An adapter with nothing to
	// check, or that cannot say (its init failed, which planning reports),
	// answers an error matching ErrNoCheck.
	Check(ctx context.Context, c CheckCall) (*protocol.CheckResult, error)
}

// ErrNoCheck is the answer of Adapters.Check for an adapter that has
// nothing to check.
var ErrNoCheck = errors.New("the adapter has nothing to check")

// CheckCall is one check of an adapter type.
type CheckCall struct {
	App     string
	Lineage string
	Type    string
	// Resource is one resource of the type: the call mounts its plugs.
	Resource string
	// Mode is the run the check is made for (protocol.RequestExt.Mode).
	Mode Mode
}

// Capabilities of an adapter, from its init answer.
type Capabilities struct {
	// Destroy is true for adapters that speak the gcompose protocol: their
	// state call understands desired=absent. Plain Deployster adapters cannot
	// remove what they made; destroy forgets their resources with a warning.
	Destroy bool
	// Estimate is true for adapters whose state call estimates the cost of
	// a resource whose config is only known after apply.
	Estimate bool
	// CreateBeforeDestroy is true for adapters that can create a rebuild's
	// replacement before they remove what exists, when asked
	// (InitExt.CreateBeforeDestroy).
	CreateBeforeDestroy bool
	// Outputs are the outputs the adapter declares its resources report
	// (the top-level properties of its init answer's outputs schema), or
	// nil when it declares none.
	Outputs []string
}

// DeclaredOutputs are the top-level properties of an outputs schema, sorted;
// nil when the schema lists none.
func DeclaredOutputs(schema map[string]any) []string {
	props, _ := schema["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrNoSweep is the answer of Adapters.Sweep for an adapter that has no
// sweep to offer.
var ErrNoSweep = errors.New("the adapter does not offer sweep")

// Call identifies one resource for a state or action call.
type Call struct {
	App string
	// Lineage is the state's lineage ("" before the first deploy).
	Lineage string
	// Name is the resource's address (the state's key); AdapterName the
	// name its adapter receives (AdapterNameOf).
	Name        string
	AdapterName string
	Type        string
	Config      map[string]any
	Persisted   *protocol.Persisted
	// Operation is, on action calls, the pending operation recorded just
	// before the call.
	Operation *protocol.Operation
	// ReportIdentity, if set, receives on action calls each identity
	// report as soon as the adapter makes it, while the action runs. An
	// implementation calls it in order and before Action returns (never
	// after), and still returns everything reported in ActionOutcome.
	ReportIdentity func(identity map[string]any)
	// Estimate marks a state call made only for the cost estimate of a
	// resource whose config still holds references known after apply.
	Estimate bool
	// AnswerState, on the last action call of a STALE answer, asks the
	// adapter to end the action with the state the verifying state call
	// for this desired presence would answer (ActionOutcome.State), if it
	// can (protocol extension action_state). "": not asked.
	AnswerState string
	// PlannedCost is, on action calls, the cost the approved plan showed
	// for the resource (protocol.RequestExt.PlannedCost).
	PlannedCost *protocol.Cost
	// Replace marks a state call made by plan only for a resource apply
	// will remove and create anew, asking what that create will leave
	// (protocol.RequestExt.Replace).
	Replace bool
	// CreateBeforeDestroy asks, on state calls, for a rebuild that creates
	// the replacement first (protocol.RequestExt.CreateBeforeDestroy).
	CreateBeforeDestroy bool
	// Refresh marks the state calls of a refresh, which only report
	// (protocol.RequestExt.Refresh).
	Refresh bool
}

// SweepCall is one sweep of an adapter type.
type SweepCall struct {
	App     string
	Lineage string
	Type    string
	// Resource is one resource of the type: the call mounts its plugs.
	Resource  string
	Known     []protocol.KnownResource
	Terminate bool
	// Only: with Terminate, the IDs to terminate (protocol SweepRequest.Only).
	Only []string
}

// ActionOutcome is what an action produced.
type ActionOutcome struct {
	Output   string
	Identity map[string]any
	// State is the state the action ended with when the call asked for it
	// (Call.AnswerState) and the adapter answered; nil: ask the state call.
	State *protocol.StateResult
}

// AdapterNameOf is the name the adapter of the resource at addr receives:
// the one it was created under while it is in the state (old), else the
// descriptor's name (address.AdapterName). A resource recorded before
// names were recorded keeps its address, so its adapter finds what it made.
func AdapterNameOf(addr string, old *state.Resource) string {
	if old != nil && old.Status != state.StatusTerminated {
		return old.CalledAs()
	}
	return address.AdapterName(addr)
}
