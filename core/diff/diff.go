// Package diff compares two snapshots of an application — two states, a
// state and a descriptor, two environments — resource by resource, and
// reports the semantic differences as JSON pointers.
package diff

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/jsondiff"
	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// Resource is what a snapshot says about one resource. Fields a source does
// not know (a descriptor has no status or outputs) stay nil and are not
// compared.
type Resource struct {
	Type         string         `json:"type,omitempty"`
	Status       string         `json:"status,omitempty"`
	Config       map[string]any `json:"config,omitempty"`
	State        map[string]any `json:"state,omitempty"`
	Identity     map[string]any `json:"identity,omitempty"`
	Dependencies []string       `json:"dependencies,omitempty"`
}

// Snapshot is one side of a comparison.
type Snapshot struct {
	// Label names the source in output ("state:.gcompose/state#shop").
	Label string
	// Kind is "state" or "descriptor": a descriptor knows no status, outputs
	// or identity, so those are compared only between two states.
	Kind      string
	Resources map[string]Resource
}

// Options choose what is compared besides type, config and dependencies.
type Options struct {
	Status   bool // compare status (between two states)
	Outputs  bool // compare the adapters' reported state (outputs)
	Identity bool // compare identifying attributes (differ between environments by nature)
}

// Op, Change and Values are core/jsondiff's: the plan output compares config
// trees with the same walk.
type (
	Op     = jsondiff.Op
	Change = jsondiff.Change
)

const (
	Added   = jsondiff.Added
	Removed = jsondiff.Removed
	Changed = jsondiff.Changed
)

// Values compares two JSON values below path (see jsondiff.Values).
func Values(path string, a, b any) []Change { return jsondiff.Values(path, a, b) }

// ResourceDiff is one resource that differs: added or removed as a whole,
// or changed field by field.
type ResourceDiff struct {
	Resource string   `json:"resource"`
	Op       Op       `json:"op"`
	Changes  []Change `json:"changes,omitempty"`
}

// Result of a comparison.
type Result struct {
	From      string         `json:"from"`
	To        string         `json:"to"`
	Resources []ResourceDiff `json:"resources"`
	Unchanged int            `json:"unchanged"`
}

// Empty reports whether the snapshots are the same.
func (r *Result) Empty() bool { return len(r.Resources) == 0 }

// Compare returns how b differs from a.
func Compare(a, b Snapshot, opt Options) *Result {
	res := &Result{From: a.Label, To: b.Label, Resources: []ResourceDiff{}}
	names := map[string]bool{}
	for n := range a.Resources {
		names[n] = true
	}
	for n := range b.Resources {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	bothStates := a.Kind != "descriptor" && b.Kind != "descriptor"
	for _, n := range sorted {
		ra, inA := a.Resources[n]
		rb, inB := b.Resources[n]
		switch {
		case !inA:
			res.Resources = append(res.Resources, ResourceDiff{Resource: n, Op: Added})
		case !inB:
			res.Resources = append(res.Resources, ResourceDiff{Resource: n, Op: Removed})
		default:
			var ch []Change
			ch = append(ch, Values("/type", str(ra.Type), str(rb.Type))...)
			if bothStates && opt.Status {
				ch = append(ch, Values("/status", str(ra.Status), str(rb.Status))...)
			}
			ch = append(ch, Values("/config", normalize(ra.Config), normalize(rb.Config))...)
			ch = append(ch, Values("/dependencies", normalize(sortedCopy(ra.Dependencies)), normalize(sortedCopy(rb.Dependencies)))...)
			if bothStates && opt.Outputs {
				ch = append(ch, Values("/state", normalize(ra.State), normalize(rb.State))...)
			}
			if bothStates && opt.Identity {
				ch = append(ch, Values("/identity", normalize(ra.Identity), normalize(rb.Identity))...)
			}
			if len(ch) == 0 {
				res.Unchanged++
				continue
			}
			res.Resources = append(res.Resources, ResourceDiff{Resource: n, Op: Changed, Changes: ch})
		}
	}
	return res
}

func str(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func sortedCopy(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// normalize is v in its JSON form (jsonvalue.Normalize), with an empty map
// or a nil list as nothing: a config written {} and one left out are the same.
func normalize(v any) any {
	if v == nil || reflect.ValueOf(v).Kind() == reflect.Map && reflect.ValueOf(v).Len() == 0 ||
		reflect.ValueOf(v).Kind() == reflect.Slice && reflect.ValueOf(v).IsNil() {
		return nil
	}
	return jsonvalue.Normalize(v)
}

// Render writes the result for people:
//
//	--- FROM
//	+++ TO
//	+ resources.new (only in TO)
//	- resources.old (only in FROM)
//	~ resources.a
//	    ~ /config/content: "1" -> "2"
//	Diff: 1 added, 1 removed, 1 changed, 0 unchanged.
func (r *Result) Render(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", r.From, r.To)
	for _, rd := range r.Resources {
		switch rd.Op {
		case Added:
			fmt.Fprintf(&b, "+ %s (only in %s)\n", rd.Resource, r.To)
		case Removed:
			fmt.Fprintf(&b, "- %s (only in %s)\n", rd.Resource, r.From)
		default:
			fmt.Fprintf(&b, "~ %s\n", rd.Resource)
			for _, c := range rd.Changes {
				switch c.Op {
				case Added:
					fmt.Fprintf(&b, "    + %s = %s\n", c.Path, show(c.To))
				case Removed:
					fmt.Fprintf(&b, "    - %s = %s\n", c.Path, show(c.From))
				default:
					fmt.Fprintf(&b, "    ~ %s: %s -> %s\n", c.Path, show(c.From), show(c.To))
				}
			}
		}
	}
	if r.Empty() {
		fmt.Fprintf(&b, "No differences (%d resource(s) compared).\n", r.Unchanged)
	} else {
		add, rem, chg := r.counts()
		fmt.Fprintf(&b, "Diff: %d added, %d removed, %d changed, %d unchanged.\n", add, rem, chg, r.Unchanged)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r *Result) counts() (add, rem, chg int) {
	for _, rd := range r.Resources {
		switch rd.Op {
		case Added:
			add++
		case Removed:
			rem++
		default:
			chg++
		}
	}
	return
}

func show(v any) string { return jsondiff.Text(v) }
