package plan

import (
	"strings"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

// PersistedOf is what an adapter is told of a resource's persisted state,
// including an operation recorded on it but never completed.
func PersistedOf(r *state.Resource) *protocol.Persisted {
	if r == nil {
		return nil
	}
	return &protocol.Persisted{State: r.State, Identity: r.Identity, Config: r.Config, Pending: OperationOf(r.Pending)}
}

// OperationOf is a recorded operation as adapters see it (nil for nil).
func OperationOf(op *state.Operation) *protocol.Operation {
	if op == nil {
		return nil
	}
	return &protocol.Operation{ID: op.ID, Kind: string(op.Kind), Action: op.Action, StartedAt: op.StartedAt}
}

// fillStale turns a STALE answer into a step: the change kind the adapter
// declared, or for plain Deployster adapters create/update by whether the
// resource is in the state.
func fillStale(s *Step, ans *protocol.StateResult, old *state.Resource) {
	s.Actions = ans.Actions
	ext := ans.Gcompose
	kind := ""
	if ext != nil {
		kind = ext.Change
		s.Reason = ext.Reason
		s.Forces = ext.Forces
		s.Unknown = ext.Unknown
		s.Planned = ext.Planned
	}
	switch kind {
	case protocol.ChangeCreate:
		s.Op = Create
	case protocol.ChangeRebuild:
		s.Op = Rebuild
	case protocol.ChangeDelete:
		s.Op = Delete
	case protocol.ChangeUpdate:
		s.Op = Update
	default:
		if old == nil {
			s.Op = Create
		} else {
			s.Op = Update
		}
	}
	if old != nil && s.Op == Create {
		// Recorded in state but the adapter must create it: it is gone.
		s.Drift = "gone"
		if s.Reason == "" {
			s.Reason = "recorded in state but missing: recreated"
		}
	}
	if old != nil && old.Pending != nil && s.Reason == "" {
		s.Reason = "finishing " + old.Pending.Describe()
	}
	if s.Reason == "" {
		names := make([]string, len(ans.Actions))
		for i, a := range ans.Actions {
			names[i] = a.Name
		}
		s.Reason = "adapter reports STALE: " + strings.Join(names, ", ")
	}
}

// OpOf is the op a state answer asks for, judged as fillStale judges it.
func OpOf(ans *protocol.StateResult, old *state.Resource) Op {
	if ans.Status == protocol.Valid {
		return NoOp
	}
	s := &Step{}
	fillStale(s, ans, old)
	return s.Op
}
