package diff

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b any
		want []Change
	}{
		{"equal scalars", "x", "x", nil},
		{"changed scalar", "x", "y", []Change{{Op: Changed, Path: "/c", From: "x", To: "y"}}},
		{"type change", 1.0, "1", []Change{{Op: Changed, Path: "/c", From: 1.0, To: "1"}}},
		{"added", nil, "y", []Change{{Op: Added, Path: "/c", To: "y"}}},
		{"removed", "x", nil, []Change{{Op: Removed, Path: "/c", From: "x"}}},
		{"nested map", map[string]any{"a": map[string]any{"b": 1.0, "gone": true}}, map[string]any{"a": map[string]any{"b": 2.0, "new": "n"}},
			[]Change{
				{Op: Changed, Path: "/c/a/b", From: 1.0, To: 2.0},
				{Op: Removed, Path: "/c/a/gone", From: true},
				{Op: Added, Path: "/c/a/new", To: "n"},
			}},
		{"pointer escaping", map[string]any{"a/b": 1.0, "m~n": 1.0}, map[string]any{"a/b": 2.0, "m~n": 2.0},
			[]Change{{Op: Changed, Path: "/c/a~1b", From: 1.0, To: 2.0}, {Op: Changed, Path: "/c/m~0n", From: 1.0, To: 2.0}}},
		{"array grows", []any{"a"}, []any{"a", "b"}, []Change{{Op: Added, Path: "/c/1", To: "b"}}},
		{"array shrinks and changes", []any{"a", "b"}, []any{"z"},
			[]Change{{Op: Changed, Path: "/c/0", From: "a", To: "z"}, {Op: Removed, Path: "/c/1", From: "b"}}},
		{"map becomes array", map[string]any{}, []any{}, []Change{{Op: Changed, Path: "/c", From: map[string]any{}, To: []any{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Values("/c", tc.a, tc.b)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func doc(rs ...*state.Resource) *state.Document {
	d := state.NewDocument("shop")
	for _, r := range rs {
		d.Resources[r.Name] = r
	}
	return d
}

func TestCompare(t *testing.T) {
	a := &state.Resource{Name: "resources.a", Type: "file", Status: state.StatusActive,
		Config: map[string]any{"path": "a.txt", "content": "1"}, State: map[string]any{"sha256": "aa"}, Identity: map[string]any{"inode": 1}}
	a2 := a.Clone()
	a2.Config["content"] = "2"
	a2.State = map[string]any{"sha256": "bb"}
	a2.Identity = map[string]any{"inode": 2}
	b := &state.Resource{Name: "resources.b", Type: "file", Status: state.StatusActive, Dependencies: []string{"resources.a"}}
	b2 := b.Clone()
	b2.Status = state.StatusTerminated
	b2.Dependencies = nil
	c := &state.Resource{Name: "resources.c", Type: "file", Status: state.StatusActive}
	d := &state.Resource{Name: "resources.d", Type: "file", Status: state.StatusActive, Config: map[string]any{"n": 1}}
	dSame := d.Clone()
	dSame.Config = map[string]any{"n": 1.0} // same JSON, other Go type

	for _, tc := range []struct {
		name string
		a, b Snapshot
		opt  Options
		want []ResourceDiff
		same int
	}{
		{"identical", FromState("x", doc(a, c)), FromState("y", doc(a.Clone(), c.Clone())), Options{Status: true, Outputs: true, Identity: true}, []ResourceDiff{}, 2},
		{"json-equal numbers", FromState("x", doc(d)), FromState("y", doc(dSame)), Options{}, []ResourceDiff{}, 1},
		{"added and removed", FromState("x", doc(a, c)), FromState("y", doc(a.Clone(), d)), Options{},
			[]ResourceDiff{{Resource: "resources.c", Op: Removed}, {Resource: "resources.d", Op: Added}}, 1},
		{"config only by default", FromState("x", doc(a, b)), FromState("y", doc(a2, b2)), Options{},
			[]ResourceDiff{
				{Resource: "resources.a", Op: Changed, Changes: []Change{{Op: Changed, Path: "/config/content", From: "1", To: "2"}}},
				{Resource: "resources.b", Op: Changed, Changes: []Change{{Op: Removed, Path: "/dependencies", From: []any{"resources.a"}}}},
			}, 0},
		{"status outputs identity on request", FromState("x", doc(a, b)), FromState("y", doc(a2, b2)), Options{Status: true, Outputs: true, Identity: true},
			[]ResourceDiff{
				{Resource: "resources.a", Op: Changed, Changes: []Change{
					{Op: Changed, Path: "/config/content", From: "1", To: "2"},
					{Op: Changed, Path: "/state/sha256", From: "aa", To: "bb"},
					{Op: Changed, Path: "/identity/inode", From: 1.0, To: 2.0},
				}},
				{Resource: "resources.b", Op: Changed, Changes: []Change{
					{Op: Changed, Path: "/status", From: "Active", To: "Terminated"},
					{Op: Removed, Path: "/dependencies", From: []any{"resources.a"}},
				}},
			}, 0},
		{"state vs descriptor ignores status and outputs", FromState("state", doc(a, b)),
			FromDesired("descriptor", map[string]*plan.Resource{
				"resources.a": {Name: "resources.a", Type: "file", Config: map[string]any{"path": "a.txt", "content": "3"}},
				"resources.b": {Name: "resources.b", Type: "file", DependsOn: []string{"resources.a"}},
			}), Options{Status: true, Outputs: true, Identity: true},
			[]ResourceDiff{{Resource: "resources.a", Op: Changed, Changes: []Change{{Op: Changed, Path: "/config/content", From: "1", To: "3"}}}}, 1},
		{"type change", FromState("x", doc(c)), FromState("y", doc(&state.Resource{Name: "resources.c", Type: "golem"})), Options{},
			[]ResourceDiff{{Resource: "resources.c", Op: Changed, Changes: []Change{{Op: Changed, Path: "/type", From: "file", To: "golem"}}}}, 0},
		{"empty vs something", FromState("x", nil), FromState("y", doc(c)), Options{}, []ResourceDiff{{Resource: "resources.c", Op: Added}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.a, tc.b, tc.opt)
			if !reflect.DeepEqual(got.Resources, tc.want) || got.Unchanged != tc.same {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tc.want, "", " ")
				t.Errorf("got %s\nwant %s (unchanged %d)", g, w, tc.same)
			}
		})
	}
}

func TestRender(t *testing.T) {
	a := &state.Resource{Name: "resources.a", Type: "file", Config: map[string]any{"content": "1"}}
	a2 := a.Clone()
	a2.Config["content"] = "2"
	a2.Config["mode"] = "0644"
	old := &state.Resource{Name: "resources.old", Type: "file"}
	nw := &state.Resource{Name: "resources.new", Type: "file"}
	res := Compare(FromState("staging", doc(a, old)), FromState("production", doc(a2, nw)), Options{})
	var b bytes.Buffer
	if err := res.Render(&b); err != nil {
		t.Fatal(err)
	}
	want := `--- staging
+++ production
~ resources.a
    ~ /config/content: "1" -> "2"
    + /config/mode = "0644"
+ resources.new (only in production)
- resources.old (only in staging)
Diff: 1 added, 1 removed, 1 changed, 0 unchanged.
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	empty := Compare(FromState("x", doc(a)), FromState("y", doc(a.Clone())), Options{})
	empty.Render(&b)
	if !strings.Contains(b.String(), "No differences (1 resource(s) compared).") {
		t.Errorf("empty diff: %s", b.String())
	}
}

func TestResolveWith(t *testing.T) {
	st := FromState("state", doc(
		&state.Resource{Name: "resources.a", Type: "file", Config: map[string]any{"content": "x"}, State: map[string]any{"sha256": "aa"}},
		&state.Resource{Name: "resources.b", Type: "file", Config: map[string]any{"content": "a is aa", "other": "z is ${resources.z.state.id}"}},
	))
	desc := FromDesired("descriptor", map[string]*plan.Resource{
		"resources.a": {Name: "resources.a", Type: "file", Config: map[string]any{"content": "x"}},
		"resources.b": {Name: "resources.b", Type: "file", Config: map[string]any{"content": "a is ${resources.a.state.sha256}", "other": "z is ${resources.z.state.id}"}},
	})
	resolved, err := ResolveWith(desc, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := Compare(st, resolved, Options{}); !got.Empty() || got.Unchanged != 2 {
		t.Errorf("resolved descriptor differs from the state: %+v", got.Resources)
	}
	if got := Compare(st, desc, Options{}); got.Empty() {
		t.Error("unresolved descriptor compares equal")
	}
}
