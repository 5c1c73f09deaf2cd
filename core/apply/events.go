package apply

import (
	"sort"
	"time"
)

// Phase of a resource's progress.
type Phase string

const (
	PhaseState      Phase = "state"       // asking the adapter what exists
	PhaseWait       Phase = "wait"        // waiting for a dependency's output
	PhaseAction     Phase = "action"      // an action started
	PhaseIdentity   Phase = "identity"    // an action reported what it made; recorded at once
	PhaseActionDone Phase = "action-done" // an action finished
	PhaseVerify     Phase = "verify"      // asking again after the actions
	PhaseDone       Phase = "done"
	PhaseFailed     Phase = "failed"
	PhaseSkipped    Phase = "skipped"
	// PhaseInterrupted: the run was interrupted before the resource
	// started its actions; it was left as it was.
	PhaseInterrupted Phase = "interrupted"
	// PhaseSwept reports an object a sweep found that no state names
	// (terminated, or reported); the event names no resource.
	PhaseSwept Phase = "swept"
)

// Event is one progress report; the CLI renders them for people or as JSON.
type Event struct {
	Time     time.Time     `json:"time"`
	Resource string        `json:"resource"`
	Phase    Phase         `json:"phase"`
	Message  string        `json:"message,omitempty"`
	Output   string        `json:"-"`
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// Observer receives events; it must be safe for concurrent use.
type Observer func(Event)

func sortOutcomes(o []*Outcome) {
	sort.Slice(o, func(i, j int) bool { return o[i].Resource < o[j].Resource })
}
