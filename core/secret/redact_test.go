package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
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

// trickyValues hold each character that some encoding of our outputs
// treats specially, and all of them at once.
var trickyValues = []string{
	`dq"quote-secret`, `bs\slash-secret`, "lt<-secret", "gt>-secret", "amp&-secret", "it's-secret",
	"line-one-secret\nline-two-secret", "tab\t-secret", "grüße-secret", "ls\u2028-secret",
	"all\"\\<>&'\n\tgrüße\u2028-secret", "ctl\x01\x7f-secret", "bad-utf8\xff-secret",
}

// jsonNoHTML is the JSON our outputs write (JSON events, summaries, plans,
// diff): not HTML-escaped.
func jsonNoHTML(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Every form a secret takes in an output is masked: as typed, in JSON with
// and without HTML escaping, quoted by %q and by the schema validator, and
// nested (an error quoting the value, carried by a JSON event; an error
// quoting an adapter's JSON answer, carried by a JSON event), in one write
// and split across writes.
func TestRedactEveryForm(t *testing.T) {
	printer := message.NewPrinter(language.English)
	for _, v := range trickyValues {
		r := NewRedactor()
		r.Add(v)
		html, _ := json.Marshal(v)
		answer, _ := json.Marshal(map[string]any{"config": map[string]any{"password": v}})
		schemaErr := (&kind.Format{Got: v, Want: "email", Err: errors.New("no @")}).LocalizedString(printer)
		patternErr := fmt.Sprintf("%q does not match the pattern %q", v, "^[0-7]{3}$")
		outputs := map[string]string{
			"text":                         "password: " + v + "\n",
			"json.Marshal":                 string(html),
			"JSON without HTML escaping":   jsonNoHTML(t, map[string]string{"message": "password " + v}),
			"%q":                           fmt.Sprintf("error: %q\n", v),
			"schema quote":                 schemaErr,
			"JSON event of a %q error":     jsonNoHTML(t, map[string]string{"error": patternErr}),
			"JSON of an HTML-escaped JSON": jsonNoHTML(t, map[string]string{"error": "config " + string(html)}),
			"JSON event of a %q answer":    jsonNoHTML(t, map[string]string{"error": fmt.Sprintf("stdout began %q", answer)}),
			"JSON of a schema error":       string(mustMarshal(t, map[string]string{"error": schemaErr})),
		}
		for name, out := range outputs {
			masked := r.Redact(out)
			if masked == out || strings.Contains(masked, "secret") {
				t.Errorf("%q, %s: %q shows it", v, name, masked)
			}
			var b bytes.Buffer
			w := r.Writer(&b)
			for i := range len(out) {
				w.Write([]byte{out[i]})
			}
			w.Flush()
			if b.String() != masked {
				t.Errorf("%q, %s, written a byte at a time: %q, want %q", v, name, b.String(), masked)
			}
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A secret that begins or ends another is masked in the other's forms as
// a whole, not as its own mask followed by the rest of the other.
func TestRedactPrefixAndSuffix(t *testing.T) {
	const base = "base-secret"
	long := base + `&"tail`
	r := NewRedactor()
	r.Add(base, long, `<head"`+base)
	for _, tt := range []struct{ in, want string }{
		{long, Mask},
		{jsonNoHTML(t, long), `"` + Mask + `"` + "\n"},
		{string(mustMarshal(t, long)), `"` + Mask + `"`},
		{fmt.Sprintf("%q", long), `"` + Mask + `"`},
		{fmt.Sprintf("%q", `<head"`+base), `"` + Mask + `"`},
		{jsonNoHTML(t, `<head"`+base+" "+base), `"` + Mask + " " + Mask + `"` + "\n"},
	} {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A secret that is not a string is masked as its JSON text, with and
// without HTML escaping.
func TestRedactAddValue(t *testing.T) {
	r := NewRedactor()
	r.AddValue(map[string]any{"user": "u", "password": "a<b&c"})
	r.AddValue(nil)
	for _, out := range []string{
		`{"password":"a<b&c","user":"u"}`,
		string(mustMarshal(t, map[string]any{"user": "u", "password": "a<b&c"})),
		jsonNoHTML(t, map[string]any{"config": `{"password":"a<b&c","user":"u"}`}),
	} {
		if got := r.Redact(out); strings.Contains(got, "a<b") || strings.Contains(got, `a\u003cb`) {
			t.Errorf("Redact(%q) = %q", out, got)
		}
	}
	if r.Redact("u") != "u" {
		t.Error("a part of a secret value is masked on its own")
	}
}

// BenchmarkWriter: output through a redactor that knows the tricky values
// (every form of each) and two plain secrets, none of which occurs.
func BenchmarkWriter(b *testing.B) {
	r := NewRedactor()
	r.Add(trickyValues...)
	r.Add("pw-0123456789abcdef", "ak-fedcba9876543210")
	line := []byte(`{"v":1,"type":"event","resource":"resources.web","phase":"action-output","message":"ran echo <a> & \"b\" at line 42"}` + "\n")
	b.Logf("%d patterns", r.Len())
	b.SetBytes(int64(len(line)))
	w := r.Writer(io.Discard)
	for b.Loop() {
		w.Write(line)
	}
	w.Flush()
}

// A secret that is not a string (a secret field holding an object) is
// masked whole in a tree: its leaves are not secrets one by one, so a plan
// would otherwise show them field by field.
func TestMaskTreeMasksAStructuredSecretWhole(t *testing.T) {
	r := NewRedactor()
	r.AddValue(map[string]any{"user": "app", "token": "tok-1234"})
	r.AddValue([]any{"k1", 2.0})
	in := map[string]any{
		"auth":  map[string]any{"token": "tok-1234", "user": "app"},
		"keys":  []any{"k1", 2},
		"other": map[string]any{"user": "app"},
	}
	got, _ := json.Marshal(r.MaskTree(in))
	if want := `{"auth":"(sensitive)","keys":"(sensitive)","other":{"user":"app"}}`; string(got) != want {
		t.Errorf("MaskTree = %s, want %s", got, want)
	}
}
