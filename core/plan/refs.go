package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonpointer"
)

// OutputRef splits a runtime reference into the resource whose outputs it
// reads and the path inside those outputs (address.ParseOutput), or the
// application's own outputs: app.id -> app, id (the state lineage).
func OutputRef(r expr.Ref) (resource string, field []expr.Step, err error) {
	p := r.Path
	if len(p) == 2 && !p[1].IsIndex && p[0].Name == AppOutputs && p[1].Name == "id" {
		return AppOutputs, p[1:], nil
	}
	return address.ParseOutput(r.Text(), p)
}

// AppOutputs is the pseudo-resource whose outputs are the application's own:
// id (the state lineage, stable for the application's whole history) and name.
const AppOutputs = "app"

// AppOutputsOf returns the application's outputs, or false while it has no
// lineage yet (nothing was ever written).
func AppOutputsOf(app, lineage string) (map[string]any, bool) {
	if lineage == "" {
		return nil, false
	}
	return map[string]any{"id": lineage, "name": app}, true
}

// RecordedOutputs are the outputs a state document records: each Active
// resource's state, and the application's own. A resource that is not
// Active has none that can be trusted.
func RecordedOutputs(doc *state.Document) Outputs {
	return func(name string) (map[string]any, bool) {
		if name == AppOutputs {
			return AppOutputsOf(doc.App, doc.Lineage)
		}
		r := doc.Resources[name]
		if r == nil || r.Status != state.StatusActive {
			return nil, false
		}
		return r.State, true
	}
}

// lookupField finds a field path in an output tree.
func lookupField(v any, path []expr.Step) (any, bool) {
	for _, s := range path {
		if s.IsIndex {
			l, ok := v.([]any)
			if !ok || s.Index < 0 || s.Index >= len(l) {
				return nil, false
			}
			v = l[s.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[s.Name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// Outputs gives a resource's current outputs; ok is false while the resource
// has none that can be trusted (it is about to be created or rebuilt).
type Outputs func(resource string) (state map[string]any, ok bool)

// ResolveConfig substitutes every runtime reference in cfg whose value is
// known. It returns the new config and the references still unknown.
func ResolveConfig(cfg map[string]any, outs Outputs) (map[string]any, []expr.Unknown, error) {
	return resolveConfig(cfg, outs, false, nil, nil)
}

// resolveStrict is ResolveConfig for planning: a reference to an output
// that a resource whose outputs are known (deployed and unchanged) does not
// report is an error now, not a wait at apply for something that never
// comes; one to an output that a changing resource's adapter planned
// (Step.Planned) gets that value.
func resolveStrict(cfg map[string]any, outs Outputs, declared Declared, planned Planned) (map[string]any, []expr.Unknown, error) {
	return resolveConfig(cfg, outs, true, declared, planned)
}

// Declared gives the outputs a resource's adapter declares (nil, false:
// it declares none).
type Declared func(resource string) ([]string, bool)

// Planned gives, for a resource about to change, the outputs its adapter
// says its actions will leave, known now (JSON pointer -> value), and
// those it says are known only after apply; nil, nil for none.
type Planned func(resource string) (values map[string]any, unknown []string)

// plannedValue is the value a planned output gives the field path: the
// value of the most specific planned pointer at or above the field, unless
// the field is, or holds, one known only after apply. A field above every
// planned pointer (an object only partly planned) has no value yet.
func plannedValue(values map[string]any, unknown []string, field []expr.Step) (any, bool) {
	if len(values) == 0 {
		return nil, false
	}
	path := make([]string, len(field))
	for i, s := range field {
		if s.IsIndex {
			path[i] = strconv.Itoa(s.Index)
		} else {
			path[i] = s.Name
		}
	}
	if overlapsUnknown(jsonpointer.Format(path), unknown) {
		return nil, false
	}
	best, found := -1, any(nil)
	for ptr, v := range values {
		toks, ok := jsonpointer.Split(ptr)
		if !ok || len(toks) <= best || !isPrefix(toks, path) {
			continue
		}
		if x, ok := lookupField(v, field[len(toks):]); ok {
			best, found = len(toks), x
		}
	}
	return found, best >= 0
}

// isPrefix says whether p is a prefix of path (or path itself).
func isPrefix(p, path []string) bool {
	return len(p) <= len(path) && slices.Equal(p, path[:len(p)])
}

func resolveConfig(cfg map[string]any, outs Outputs, strict bool, declared Declared, planned Planned) (map[string]any, []expr.Unknown, error) {
	lookup := func(r expr.Ref) (any, bool, error) {
		res, field, err := OutputRef(r)
		if err != nil {
			return nil, false, err
		}
		st, ok := outs(res)
		if !ok && planned != nil {
			vals, unknown := planned(res)
			if v, ok := plannedValue(vals, unknown, field); ok {
				return v, true, nil
			}
		}
		if !ok {
			if declared != nil && len(field) > 0 && !field[0].IsIndex {
				if names, ok := declared(res); ok && !slices.Contains(names, field[0].Name) {
					return nil, false, &UndeclaredOutputError{Resource: res, Field: field[0].Name, Declared: names}
				}
			}
			return nil, false, nil
		}
		v, ok := lookupField(map[string]any(st), field)
		if !ok && strict {
			return nil, false, &MissingOutputError{Ref: r.Text(), Resource: res, Reported: slices.Sorted(maps.Keys(st))}
		}
		return v, ok, nil
	}
	out, unknown, err := expr.EvalTree(map[string]any(cfg), lookup)
	if err != nil {
		return nil, nil, err
	}
	m, _ := out.(map[string]any)
	return m, unknown, nil
}

// MissingOutputError is a reference to an output its resource does not
// report.
type MissingOutputError struct {
	Ref      string
	Resource string
	Reported []string
}

func (e *MissingOutputError) Error() string {
	have := "nothing"
	if len(e.Reported) > 0 {
		have = strings.Join(e.Reported, ", ")
	}
	return fmt.Sprintf("%s reports no such output (it reports: %s)", e.Resource, have)
}

// UndeclaredOutputError is a reference to an output that the resource's
// adapter does not declare in its init answer.
type UndeclaredOutputError struct {
	Resource string
	Field    string
	Declared []string
}

func (e *UndeclaredOutputError) Error() string {
	return fmt.Sprintf("%s will not report %s: its adapter declares the outputs %s", e.Resource, e.Field, strings.Join(e.Declared, ", "))
}

// NoSuchResourceError is a reference to a resource the application does
// not have: one a lowering may add (resolve.Options.Implicit) but did not.
type NoSuchResourceError struct {
	Ref      string
	Resource string
}

func (e *NoSuchResourceError) Error() string {
	return fmt.Sprintf("%s: the application has no resource %s", e.Ref, e.Resource)
}

// refsExist checks that every reference in v names a resource that exists.
func refsExist(v map[string]any, exists func(string) bool) error {
	_, _, err := expr.EvalTree(v, func(r expr.Ref) (any, bool, error) {
		res, _, err := OutputRef(r)
		if err != nil {
			return nil, false, err
		}
		if !exists(res) {
			return nil, false, &NoSuchResourceError{Ref: r.Text(), Resource: res}
		}
		return nil, false, nil
	})
	return err
}
