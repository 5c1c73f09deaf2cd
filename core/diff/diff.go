// Package diff compares two snapshots of an application — two states, a
// state and a descriptor, two environments — resource by resource, and
// reports the semantic differences as JSON pointers.
package diff

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
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

// Op of a change.
type Op string

const (
	Added   Op = "added"
	Removed Op = "removed"
	Changed Op = "changed"
)

// Change is one field that differs: Path is a JSON pointer into the
// resource (e.g. /config/content).
type Change struct {
	Op   Op     `json:"op"`
	Path string `json:"path"`
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

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

// normalize turns Go values into their JSON forms (numbers as float64,
// structs as maps) so that equal JSON compares equal.
func normalize(v any) any {
	if v == nil || reflect.ValueOf(v).Kind() == reflect.Map && reflect.ValueOf(v).Len() == 0 ||
		reflect.ValueOf(v).Kind() == reflect.Slice && reflect.ValueOf(v).IsNil() {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// Values compares two JSON values (maps, arrays, scalars) below path and
// returns the differences, sorted by path. Maps are compared key by key;
// arrays element by element (a length change adds or removes the tail).
func Values(path string, a, b any) []Change {
	var out []Change
	walk(path, a, b, &out)
	return out
}

func walk(path string, a, b any, out *[]Change) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		*out = append(*out, Change{Op: Added, Path: path, To: b})
		return
	case b == nil:
		*out = append(*out, Change{Op: Removed, Path: path, From: a})
		return
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := map[string]bool{}
		for k := range ma {
			keys[k] = true
		}
		for k := range mb {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			walk(path+"/"+escape(k), ma[k], mb[k], out)
		}
		return
	}
	la, okA := a.([]any)
	lb, okB := b.([]any)
	if okA && okB {
		for i := 0; i < len(la) || i < len(lb); i++ {
			var x, y any
			if i < len(la) {
				x = la[i]
			}
			if i < len(lb) {
				y = lb[i]
			}
			if i >= len(la) {
				*out = append(*out, Change{Op: Added, Path: path + "/" + strconv.Itoa(i), To: y})
			} else if i >= len(lb) {
				*out = append(*out, Change{Op: Removed, Path: path + "/" + strconv.Itoa(i), From: x})
			} else {
				walk(path+"/"+strconv.Itoa(i), x, y, out)
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, Change{Op: Changed, Path: path, From: a, To: b})
	}
}

// escape a JSON pointer token (RFC 6901).
func escape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Render writes the result for people:
//
//   - resources.new      (only in TO)
//   - resources.old      (only in FROM)
//     ~ resources.a
//     ~ /config/content: "1" -> "2"
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

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}
