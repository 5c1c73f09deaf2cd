package apply

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// ErrInterrupted is the cause of resources left alone because the run was
// interrupted (Executor.Stop) before they started.
var ErrInterrupted = errors.New("interrupted")

// ErrAborted is the cause to cancel an interrupted apply's ctx with when its
// actions in flight must not finish (a second interrupt, or the grace
// period is over): they are cut short and their operations stay pending.
var ErrAborted = errors.New("aborted")

// FailedError names every resource that failed and why.
type FailedError struct{ Outcomes []*Outcome }

// Unwrap gives each resource's error, so that callers match them with
// errors.As (a *plan.Inconsistent, an adapter's error) past the summary.
func (e *FailedError) Unwrap() []error {
	errs := make([]error, 0, len(e.Outcomes))
	for _, o := range e.Outcomes {
		errs = append(errs, o.Err)
	}
	return errs
}

func (e *FailedError) Error() string {
	s := fmt.Sprintf("%d resource(s) failed:", len(e.Outcomes))
	for _, o := range e.Outcomes {
		s += "\n  " + o.Resource + ": " + plan.Reason(o.Resource, o.Err)
	}
	return s
}

// InterruptedError ends an interrupted apply: the resources whose actions
// were under way finished them (or, Aborted, were cut short, their
// operations left pending for the next run); the others were not started.
type InterruptedError struct {
	Result  *Result
	Aborted bool
}

func (e *InterruptedError) Error() string {
	var notRun, aborted, failed, done []string
	for _, o := range e.Result.Outcomes {
		var ae *AbortedError
		switch {
		case errors.Is(o.Err, ErrInterrupted) || o.Skipped:
			notRun = append(notRun, o.Resource)
		case errors.As(o.Err, &ae) || errors.Is(o.Err, ErrAborted):
			aborted = append(aborted, o.Resource)
		case o.Err != nil:
			failed = append(failed, o.Resource)
		case o.Changed:
			done = append(done, o.Resource)
		}
	}
	var parts []string
	if len(done) > 0 {
		parts = append(parts, fmt.Sprintf("%d resource(s) finished what they had started (%s)", len(done), listed(done)))
	}
	if len(aborted) > 0 {
		parts = append(parts, fmt.Sprintf("%d action(s) cut short (%s): their operations stay pending and the next deploy or destroy resolves them", len(aborted), listed(aborted)))
	}
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("%d failed (%s)", len(failed), listed(failed)))
	}
	if len(notRun) > 0 {
		parts = append(parts, fmt.Sprintf("%d not started (%s)", len(notRun), listed(notRun)))
	}
	what := "interrupted"
	if e.Aborted {
		what = "interrupted and aborted"
	}
	if len(parts) == 0 {
		return what + ": nothing was changed"
	}
	return what + ": " + strings.Join(parts, "; ")
}

func (e *InterruptedError) Unwrap() error { return ErrInterrupted }

// listed names up to five resources, sorted.
func listed(names []string) string {
	sort.Strings(names)
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// AbortedError is an action cut short by an abort: its operation stays
// recorded as pending, for the next run to resolve.
type AbortedError struct {
	Operation state.Operation
	Err       error
}

func (e *AbortedError) Error() string {
	what := string(e.Operation.Kind)
	if e.Operation.Action != "" && e.Operation.Action != what {
		what += " (action " + e.Operation.Action + ")"
	}
	return fmt.Sprintf("aborted during %s: operation %s stays pending, the next deploy or destroy resolves it", what, e.Operation.ID)
}

func (e *AbortedError) Unwrap() error { return ErrAborted }

// IsFailed reports whether err is an apply failure of some resources.
func IsFailed(err error) bool {
	var f *FailedError
	return errors.As(err, &f)
}

// stepError is the error a step failed planning with, as the outcome of
// that resource tells it.
type stepError struct {
	msg string
	err error // nil for a plan read from a file
}

func (e *stepError) Error() string { return e.msg }
func (e *stepError) Unwrap() error { return e.err }
