package jsondiff

import (
	"reflect"
	"testing"
)

func TestValues(t *testing.T) {
	cases := []struct {
		name string
		a, b any
		want []Change
	}{
		{"equal", map[string]any{"x": 1.0}, map[string]any{"x": 1.0}, nil},
		{"changed leaf", map[string]any{"x": map[string]any{"y": "1"}}, map[string]any{"x": map[string]any{"y": "2"}},
			[]Change{{Op: Changed, Path: "/x/y", From: "1", To: "2"}}},
		{"list grows", map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}},
			[]Change{{Op: Added, Path: "/l/1", To: "b"}}},
		{"key removed, escaped", map[string]any{"a/b": 1.0}, map[string]any{},
			[]Change{{Op: Removed, Path: "/a~1b", From: 1.0}}},
		{"type change", map[string]any{"x": "1"}, map[string]any{"x": []any{"1"}},
			[]Change{{Op: Changed, Path: "/x", From: "1", To: []any{"1"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Values("", c.a, c.b); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
		})
	}
}
