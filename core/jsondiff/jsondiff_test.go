package jsondiff

import (
	"reflect"
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	cases := []struct {
		name string
		a, b any
		want []Change
	}{
		{"equal", map[string]any{"x": 1.0}, map[string]any{"x": 1.0}, nil},
		{"a number from YAML equals the same from JSON", map[string]any{"x": 1, "l": []any{int64(2)}}, map[string]any{"x": 1.0, "l": []any{2.0}}, nil},
		{"a number changed", map[string]any{"x": 1}, map[string]any{"x": 1.5},
			[]Change{{Op: Changed, Path: "/x", From: 1, To: 1.5}}},
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

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"a > b && c < d", `"a > b && c < d"`},
		{map[string]any{"k": []any{1.0, "x"}}, `{"k":[1,"x"]}`},
		{strings.Repeat("x", 300), `"` + strings.Repeat("x", 300) + `"`},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestWrap(t *testing.T) {
	long := "key = " + strings.Repeat("word ", 30)
	for _, tc := range []struct {
		name          string
		indent, width int
		wrapped       bool
	}{
		{"no width", 4, 0, false},
		{"too narrow for the indent", 40, 50, false},
		{"wide enough", 4, 200, false},
		{"wrapped", 4, 40, true},
	} {
		got := Wrap(long, tc.indent, tc.width)
		if strings.Contains(got, "\n") != tc.wrapped {
			t.Errorf("%s: wrapped = %v:\n%s", tc.name, !tc.wrapped, got)
		}
		lines := strings.Split(got, "\n")
		for i, l := range lines {
			if tc.width > 0 && tc.wrapped && len(l) > tc.width {
				t.Errorf("%s: line %d longer than %d: %q", tc.name, i, tc.width, l)
			}
			if i > 0 && !strings.HasPrefix(l, strings.Repeat(" ", tc.indent)) {
				t.Errorf("%s: line %d not indented: %q", tc.name, i, l)
			}
		}
		// Unwrapping gives the line back exactly.
		back := strings.ReplaceAll(got, "\n"+strings.Repeat(" ", tc.indent), "")
		if back != long {
			t.Errorf("%s: lost text:\n%q\n%q", tc.name, back, long)
		}
	}
}
