package jsonvalue

import (
	"encoding/json"
	"testing"
)

type named map[string]any

func TestEqual(t *testing.T) {
	for i, c := range []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{1, 1.0, true},
		{int64(2), json.Number("2"), true},
		{uint8(7), float32(7), true},
		{1, "1", false},
		{"a", "a", true},
		{"a", "b", false},
		{true, false, false},
		{map[string]any{"x": []any{1, "y"}}, map[string]any{"x": []any{1.0, "y"}}, true},
		{map[string]any{"x": 1}, map[string]any{"x": 1, "y": nil}, false},
		{map[string]any{"x": 1}, map[string]any{"y": 1}, false},
		{map[string]any{}, nil, false},
		{map[string]any(nil), map[string]any{}, true},
		{[]any{1}, []any{1, 2}, false},
		{[]any{1, 2}, []any{2, 1}, false},
		// Other shapes are compared as JSON, on either side.
		{[]string{"a"}, []any{"a"}, true},
		{[]any{"a"}, []string{"a"}, true},
		{map[string]any{"k": 1}, named{"k": 1.0}, true},
		{map[string]any{"k": 1}, named{"k": 2}, false},
		{map[string]any{"k": 1}, []any{1}, false},
	} {
		if got := Equal(c.a, c.b); got != c.want {
			t.Errorf("%d: Equal(%#v, %#v) = %v, want %v", i, c.a, c.b, got, c.want)
		}
		if got := Equal(c.b, c.a); got != c.want {
			t.Errorf("%d: Equal(%#v, %#v) (swapped) = %v, want %v", i, c.b, c.a, got, c.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for _, v := range []any{3, int8(3), int16(3), int32(3), int64(3), uint(3), uint8(3), uint16(3), uint32(3), uint64(3), float32(3), 3.0, json.Number("3")} {
		if f, ok := Number(v); !ok || f != 3 {
			t.Errorf("Number(%#v) = %v, %v; want 3, true", v, f, ok)
		}
	}
	for _, v := range []any{"3", json.Number("x"), nil, true, []any{3}} {
		if _, ok := Number(v); ok {
			t.Errorf("Number(%#v) is a number", v)
		}
	}
}

func TestNormalize(t *testing.T) {
	type s struct {
		N int `json:"n"`
	}
	got := Normalize(map[string]any{"a": s{2}, "b": []string{"x"}})
	want := map[string]any{"a": map[string]any{"n": 2.0}, "b": []any{"x"}}
	if !Equal(got, want) || got.(map[string]any)["a"].(map[string]any)["n"] != 2.0 {
		t.Errorf("Normalize = %#v", got)
	}
	ch := make(chan int)
	if Normalize(ch) != any(ch) {
		t.Error("a value that does not marshal is not returned as it is")
	}
}
