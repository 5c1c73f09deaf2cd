package protocol

import (
	"slices"
	"testing"
)

// namedObject must place a propertyNames violation from the document, since
// the library's own location for it may have been overwritten by a sibling.
func TestNamedObject(t *testing.T) {
	doc := map[string]any{
		"actions":  []any{map[string]any{"name": "create"}},
		"gcompose": map[string]any{"change": "create", "planned": map[string]any{"bad.name": 1}},
		"twins":    map[string]any{"a": map[string]any{"x": 1}, "b": map[string]any{"x": 2}},
	}
	cases := []struct {
		name         string
		at, reported []string
		property     string
		want         []string
	}{
		{"overwritten tokens", []string{"gcompose"}, []string{"actions", "0"}, "bad.name", []string{"gcompose", "planned"}},
		{"from the top", nil, []string{"x", "y"}, "bad.name", []string{"gcompose", "planned"}},
		{"ancestor is the object", []string{"gcompose", "planned"}, []string{"q", "r"}, "bad.name", []string{"gcompose", "planned"}},
		{"two candidates: the ancestor", []string{"twins"}, []string{"twins", "a"}, "x", []string{"twins"}},
		{"none: the ancestor", []string{"gcompose"}, []string{"gcompose", "planned"}, "absent", []string{"gcompose"}},
		{"no document: the ancestor", []string{"gcompose"}, []string{"gcompose", "planned"}, "bad.name", []string{"gcompose"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := any(doc)
			if c.name == "no document: the ancestor" {
				d = nil
			}
			if got := namedObject(d, c.at, c.reported, c.property); !slices.Equal(got, c.want) {
				t.Errorf("namedObject(%v, %v, %q) = %v, want %v", c.at, c.reported, c.property, got, c.want)
			}
		})
	}
}
