package jsonout

import (
	"bytes"
	"testing"
)

// countingWriter counts the writes it gets.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestTextAsTyped(t *testing.T) {
	v := map[string]any{"cmd": `run > /tmp/out 2> /tmp/err & <x>`, "q": `say "hi"\n`, "n": 1}
	for _, tc := range []struct {
		name  string
		write func(*countingWriter) error
		want  string
	}{
		{"line", func(w *countingWriter) error { return Line(w, v) },
			`{"cmd":"run > /tmp/out 2> /tmp/err & <x>","n":1,"q":"say \"hi\"\\n"}` + "\n"},
		{"indented", func(w *countingWriter) error { return Indented(w, v) },
			"{\n  \"cmd\": \"run > /tmp/out 2> /tmp/err & <x>\",\n  \"n\": 1,\n  \"q\": \"say \\\"hi\\\"\\\\n\"\n}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w countingWriter
			if err := tc.write(&w); err != nil {
				t.Fatal(err)
			}
			if got := w.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if w.writes != 1 {
				t.Errorf("%d writes, want 1: a line must not be split between writers", w.writes)
			}
		})
	}
}

func TestUnencodable(t *testing.T) {
	var w countingWriter
	if err := Line(&w, func() {}); err == nil || w.Len() != 0 {
		t.Fatalf("a func: err %v, wrote %q", err, w.String())
	}
}
