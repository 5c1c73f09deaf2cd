package secret

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	r := NewRedactor()
	r.Add("hunter2", "", "abc", "abcdef", "multi\nline-secret\n}")
	tests := []struct{ in, want string }{
		{"no secrets here", "no secrets here"},
		{"pw=hunter2;", "pw=(sensitive);"},
		{"hunter2hunter2", "(sensitive)(sensitive)"},
		{"abcdefg", "(sensitive)g"},                              // longest wins
		{"abcde", "(sensitive)de"},                               // the shorter one matches
		{"x: line-secret\n}", "x: (sensitive)\n}"},               // one line of a multi-line secret; short lines are not masked alone
		{`{"v":"multi\nline-secret\n}"}`, `{"v":"(sensitive)"}`}, // JSON-escaped form
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if !r.Contains("a hunter2 b") || r.Contains("hunter") {
		t.Error("Contains is wrong")
	}
}

// A value learnt with a line break at either end (a command's stdout read
// back from the state) masks the value, and the lines around it stay apart,
// in plain text and in JSON.
func TestRedactKeepsLineBreaksAroundAValue(t *testing.T) {
	r := NewRedactor()
	r.Add("tail-secret\n", "\r\nhead-secret", "\n")
	for _, tt := range []struct{ in, want string }{
		{"stdout: tail-secret\n==> next", "stdout: (sensitive)\n==> next"},
		{"a\r\nhead-secret\r\nb", "a\r\n(sensitive)\r\nb"},
		{`{"stdout":"tail-secret\n"}`, `{"stdout":"(sensitive)\n"}`},
		{"one\ntwo\n", "one\ntwo\n"},
	} {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Every way of splitting the output into writes gives the same masked text.
func TestWriterSplitWrites(t *testing.T) {
	r := NewRedactor()
	r.Add("s3cr3t-value", "abc", "abcdef")
	text := "start s3cr3t-value mid s3cr3t-valu abcdefg abcabc end s3cr3t-value"
	want := r.Redact(text)
	if strings.Contains(want, "s3cr3t-value") {
		t.Fatalf("Redact left the secret: %q", want)
	}
	for size := 1; size <= len(text); size++ {
		var out bytes.Buffer
		w := r.Writer(&out)
		for i := 0; i < len(text); i += size {
			end := min(i+size, len(text))
			if n, err := w.Write([]byte(text[i:end])); err != nil || n != end-i {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("writes of %d bytes: got %q, want %q", size, out.String(), want)
		}
	}
	// Split at every single position into two writes.
	for cut := 0; cut <= len(text); cut++ {
		var out bytes.Buffer
		w := r.Writer(&out)
		w.Write([]byte(text[:cut]))
		w.Write([]byte(text[cut:]))
		w.Flush()
		if out.String() != want {
			t.Errorf("cut at %d: got %q", cut, out.String())
		}
	}
}

// The writer holds back only a tail that could start a known secret, and
// writes a false start as soon as it cannot be one.
func TestWriterHoldsOnlyPossibleSecrets(t *testing.T) {
	r := NewRedactor()
	r.Add("topsecret")
	var out bytes.Buffer
	w := r.Writer(&out)
	w.Write([]byte("line one\nthe value is top"))
	if got := out.String(); got != "line one\nthe value is " {
		t.Errorf("written before the end of a possible secret: %q", got)
	}
	w.Write([]byte("secret\n"))
	if got := out.String(); got != "line one\nthe value is (sensitive)\n" {
		t.Errorf("got %q", got)
	}
	w.Write([]byte("top hat"))
	w.Flush()
	if got := out.String(); !strings.HasSuffix(got, "top hat") {
		t.Errorf("a false start was not written: %q", got)
	}
}

// A value learnt after text was held back (a secret resolved while an
// adapter's output is streaming) is still masked at the next write.
func TestWriterMasksValueLearntWhileHeld(t *testing.T) {
	r := NewRedactor()
	r.Add("topsecret")
	var out bytes.Buffer
	w := r.Writer(&out)
	w.Write([]byte("key: top"))
	if got := out.String(); got != "key: " {
		t.Fatalf("before the new value: %q, want %q held back", got, "top")
	}
	r.Add("topaz-key")
	w.Write([]byte("az-key\n"))
	w.Flush()
	if got := out.String(); got != "key: (sensitive)\n" {
		t.Errorf("a value added while its start was held back leaked: %q", got)
	}
}

func TestMaskTree(t *testing.T) {
	r := NewRedactor()
	r.Add("pw")
	in := map[string]any{"url": "db://u:pw@h", "n": 3.0, "list": []any{"a", "xpwx"}, "sealed": map[string]any{EnvelopeKey: "v1:k:AAAA"}}
	got, _ := json.Marshal(r.MaskTree(in))
	want := `{"list":["a","(sensitive)"],"n":3,"sealed":"(sensitive)","url":"(sensitive)"}`
	if string(got) != want {
		t.Errorf("MaskTree = %s, want %s", got, want)
	}
	if in["url"] != "db://u:pw@h" {
		t.Error("MaskTree modified its input")
	}
}
