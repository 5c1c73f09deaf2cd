package progress

import (
	"errors"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/display"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
)

// Summary is the last object of the JSON stream: what the run did to every
// resource, and how it ended.
type Summary struct {
	V       int       `json:"v"`
	Type    string    `json:"type"` // "summary"
	Time    time.Time `json:"time"`
	Command string    `json:"command"` // plan, deploy, destroy, refresh
	App     string    `json:"app,omitempty"`
	OK      bool      `json:"ok"`
	// Interrupted: the run was stopped by SIGINT/SIGTERM (exit code 130).
	Interrupted bool         `json:"interrupted,omitempty"`
	ExitCode    int          `json:"exit_code"`
	Error       string       `json:"error,omitempty"`
	DurationMS  int64        `json:"duration_ms"`
	Counts      Counts       `json:"counts"`
	Resources   []ResOutcome `json:"resources"`
	// Swept lists what the sweep before planning found that no state names
	// (docs/events.md): terminated, or only reported.
	Swept []engine.Swept `json:"swept,omitempty"`
	// Endpoints are the URLs a deploy produced (docs/events.md).
	Endpoints []display.Endpoint `json:"endpoints,omitempty"`
	// Outputs are the descriptor's outputs after a deploy (docs/events.md).
	Outputs map[string]any `json:"outputs,omitempty"`
}

// Counts of planned ops and of outcomes.
type Counts struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Rebuild   int `json:"rebuild"`
	Delete    int `json:"delete"`
	Forget    int `json:"forget"`
	Unchanged int `json:"unchanged"`
	Changed   int `json:"changed"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
}

// Outcome of one resource.
const (
	OutcomeChanged   = "changed"   // an action ran (or it was forgotten)
	OutcomeUnchanged = "unchanged" // nothing needed doing
	OutcomeFailed    = "failed"    // its adapter failed
	OutcomeSkipped   = "skipped"   // not attempted: a dependency failed
	OutcomePlanned   = "planned"   // plan or refresh: nothing was applied
	OutcomeNotRun    = "not-run"   // the run stopped before reaching it
	OutcomeAborted   = "aborted"   // a second interrupt cut its action short
)

// ResOutcome is one resource's line of the summary.
type ResOutcome struct {
	Resource   string `json:"resource"`
	Type       string `json:"type,omitempty"`
	Op         string `json:"op"`
	Outcome    string `json:"outcome"`
	Drift      string `json:"drift,omitempty"`
	DurationMS int64  `json:"duration_ms,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Summarize builds the summary of a run from its plan and apply result
// (either may be nil) and the error and exit code it ends with; resources
// this renderer saw skipped count as skipped rather than failed.
func (r *Renderer) Summarize(command, app string, pl *plan.Plan, res *apply.Result, applied bool, took time.Duration, runErr error, exitCode int) Summary {
	r.mu.Lock()
	skipped := make(map[string]bool, len(r.skipped))
	for k := range r.skipped {
		skipped[k] = true
	}
	r.mu.Unlock()
	return Summarize(command, app, pl, res, skipped, applied, took, runErr, exitCode)
}

// Summarize is Renderer.Summarize with the skipped resources given.
func Summarize(command, app string, pl *plan.Plan, res *apply.Result, skipped map[string]bool, applied bool, took time.Duration, runErr error, exitCode int) Summary {
	s := Summary{V: Version, Type: "summary", Time: time.Now().UTC(), Command: command, App: app, OK: runErr == nil,
		ExitCode: exitCode, DurationMS: took.Milliseconds(), Resources: []ResOutcome{}}
	if runErr != nil {
		s.Error = runErr.Error()
		s.Interrupted = errors.Is(runErr, apply.ErrInterrupted)
	}
	if pl == nil {
		return s
	}
	if s.App == "" {
		s.App = pl.App
	}
	ps := pl.Summary
	s.Counts = Counts{Create: ps.Create, Update: ps.Update, Rebuild: ps.Rebuild, Delete: ps.Delete, Forget: ps.Forget, Unchanged: ps.Unchanged}
	for _, st := range pl.Steps {
		ro := ResOutcome{Resource: st.Resource, Type: st.Type, Op: string(st.Op), Drift: st.Drift}
		var o *apply.Outcome
		if res != nil {
			o = res.Outcomes[st.Resource]
		}
		switch {
		case !applied:
			ro.Outcome = OutcomePlanned
		case o == nil && st.Op == plan.NoOp:
			ro.Outcome = OutcomeUnchanged
		case o == nil || errors.Is(o.Err, apply.ErrInterrupted):
			ro.Outcome = OutcomeNotRun
		case errors.Is(o.Err, apply.ErrAborted):
			ro.Outcome = OutcomeAborted
			ro.Error = o.Err.Error()
		case o.Err != nil:
			ro.Outcome = OutcomeFailed
			if skipped[st.Resource] {
				ro.Outcome = OutcomeSkipped
			}
			ro.Error = o.Err.Error()
		case o.Changed || st.Op == plan.Forget:
			ro.Outcome = OutcomeChanged
		default:
			ro.Outcome = OutcomeUnchanged
		}
		if o != nil {
			ro.DurationMS = o.Duration.Milliseconds()
		}
		switch ro.Outcome {
		case OutcomeChanged:
			s.Counts.Changed++
		case OutcomeFailed:
			s.Counts.Failed++
		case OutcomeSkipped:
			s.Counts.Skipped++
		}
		s.Resources = append(s.Resources, ro)
	}
	return s
}

// WriteSummary writes the summary as the stream's last line (JSON mode
// only).
func (r *Renderer) WriteSummary(s Summary) {
	if r.opt.Mode != JSON {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writeJSON(s)
}
