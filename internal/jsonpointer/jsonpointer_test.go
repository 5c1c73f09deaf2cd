package jsonpointer

import (
	"reflect"
	"testing"
)

func TestEscapeRoundTrip(t *testing.T) {
	for _, tc := range []struct{ tok, esc string }{
		{"", ""}, {"a", "a"}, {"a/b", "a~1b"}, {"m~n", "m~0n"}, {"~1", "~01"}, {"/~", "~1~0"},
	} {
		if got := Escape(tc.tok); got != tc.esc {
			t.Errorf("Escape(%q) = %q, want %q", tc.tok, got, tc.esc)
		}
		if got := Unescape(tc.esc); got != tc.tok {
			t.Errorf("Unescape(%q) = %q, want %q", tc.esc, got, tc.tok)
		}
	}
}

func TestFormatSplit(t *testing.T) {
	for _, tc := range []struct {
		ptr    string
		tokens []string
	}{
		{"", nil}, {"/", []string{""}}, {"/a~1b/0", []string{"a/b", "0"}}, {"/x/~0", []string{"x", "~"}},
	} {
		if got := Format(tc.tokens); got != tc.ptr {
			t.Errorf("Format(%q) = %q, want %q", tc.tokens, got, tc.ptr)
		}
		got, ok := Split(tc.ptr)
		if !ok || !reflect.DeepEqual(got, tc.tokens) {
			t.Errorf("Split(%q) = %q, %v, want %q", tc.ptr, got, ok, tc.tokens)
		}
	}
	if _, ok := Split("a/b"); ok {
		t.Error(`Split("a/b") accepted a pointer without a leading "/"`)
	}
}

// RFC 6901 section 5's examples, plus what is not there.
func TestLookup(t *testing.T) {
	doc := map[string]any{
		"foo": []any{"bar", "baz"}, "": 0.0, "a/b": 1.0, "c%d": 2.0, "e^f": 3.0, "g|h": 4.0,
		"i\\j": 5.0, "k\"l": 6.0, " ": 7.0, "m~n": 8.0,
	}
	for ptr, want := range map[string]any{
		"/foo/0": "bar", "/": 0.0, "/a~1b": 1.0, "/c%d": 2.0, "/e^f": 3.0, "/g|h": 4.0,
		"/i\\j": 5.0, "/k\"l": 6.0, "/ ": 7.0, "/m~0n": 8.0,
	} {
		got, ok := Lookup(doc, ptr)
		if !ok || got != want {
			t.Errorf("Lookup(%q) = %v, %v, want %v", ptr, got, ok, want)
		}
	}
	if got, ok := Lookup(doc, ""); !ok || !reflect.DeepEqual(got, doc) {
		t.Errorf(`Lookup("") is not the whole document`)
	}
	for _, ptr := range []string{"foo", "/nope", "/foo/2", "/foo/-1", "/foo/01", "/foo/x", "/a~1b/c"} {
		if got, ok := Lookup(doc, ptr); ok {
			t.Errorf("Lookup(%q) = %v, want not found", ptr, got)
		}
	}
}
