package plan

import (
	"encoding/json"
	"testing"
)

func TestSameJSON(t *testing.T) {
	cases := []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{1, 1.0, true},
		{int64(2), json.Number("2"), true},
		{1, "1", false},
		{"a", "a", true},
		{map[string]any{"x": []any{1, "y"}}, map[string]any{"x": []any{1.0, "y"}}, true},
		{map[string]any{"x": 1}, map[string]any{"x": 1, "y": nil}, false},
		{map[string]any{}, nil, false},
		{map[string]any(nil), map[string]any{}, true},
		{[]any{1}, []any{1, 2}, false},
		{[]string{"a"}, []any{"a"}, true}, // other shapes: compared as JSON
		{true, false, false},
	}
	for i, c := range cases {
		if got := SameJSON(c.a, c.b); got != c.want {
			t.Errorf("%d: SameJSON(%#v, %#v) = %v, want %v", i, c.a, c.b, got, c.want)
		}
	}
}
