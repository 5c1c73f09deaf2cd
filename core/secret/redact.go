// Package secret keeps secret values out of everything gcompose prints and
// persists: a Redactor (the run-wide set of secret values) masks them in any
// output, a Codec encrypts them per value in the state with AES-GCM, and
// Store wraps a state.Store so every backend gets both. docs/secrets.md is
// the prose version.
package secret

import (
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gcompose/gcompose/internal/jsonout"
)

// Mask is what a secret value is printed as.
const Mask = "(sensitive)"

// minLineLen is the shortest line of a multi-line secret that is masked on
// its own (output that prefixes every line, such as adapter stderr echoes,
// splits a multi-line value): shorter lines ("}", "--") would mask
// unrelated text.
const minLineLen = 4

// Redactor is a set of secret values. Add values as soon as they are known;
// Redact and the writers from Writer mask every occurrence. The zero value
// is not usable: call NewRedactor. A Redactor is safe for concurrent use.
type Redactor struct {
	mu       sync.RWMutex
	set      map[string]bool
	byFirst  map[byte][]string // patterns by first byte, longest first
	maxLen   int
	patterns int
	// structured holds the JSON texts (jsonText) of secrets that are not
	// strings, which MaskTree masks whole: their leaves are not secrets
	// one by one.
	structured map[string]bool
}

// NewRedactor returns an empty redactor.
func NewRedactor() *Redactor {
	return &Redactor{set: map[string]bool{}, byFirst: map[byte][]string{}, structured: map[string]bool{}}
}

// Add registers secret values. Each is masked in every form it takes in
// gcompose's outputs (see Forms), and so is each line of a multi-line
// value. Line breaks at either end are not part of the value; empty values
// are ignored.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		// Line breaks around a value are where it stood, not what it is:
		// masking them too would join the lines around it (a command's
		// stdout "S\n", learnt from the state, made "stdout: S\nnext"
		// print as "stdout: (sensitive)next").
		if v = strings.Trim(v, "\r\n"); v == "" {
			continue
		}
		for _, f := range Forms(v) {
			r.addPattern(f)
		}
		if strings.ContainsAny(v, "\r\n") {
			for _, l := range strings.FieldsFunc(v, func(c rune) bool { return c == '\n' || c == '\r' }) {
				if l = strings.TrimSpace(l); len(l) >= minLineLen {
					for _, f := range Forms(l) {
						r.addPattern(f)
					}
				}
			}
		}
	}
}

// AddValue registers a secret that may not be a string (a config field an
// adapter marks secret, a value decrypted from the state): a string as
// Add does; anything else as the texts of its JSON, compact, with and
// without HTML escaping (json.Marshal writes one, our outputs and
// interpolation the other).
func (r *Redactor) AddValue(v any) {
	switch x := v.(type) {
	case nil:
	case string:
		r.Add(x)
	default:
		if b, err := json.Marshal(x); err == nil {
			r.Add(string(b))
		}
		if s, err := jsonText(x); err == nil {
			r.Add(s)
			r.mu.Lock()
			r.structured[s] = true
			r.mu.Unlock()
		}
	}
}

// isStructuredSecret reports whether v is a secret that is not a string.
func (r *Redactor) isStructuredSecret(v any) bool {
	r.mu.RLock()
	n := len(r.structured)
	r.mu.RUnlock()
	if n == 0 {
		return false
	}
	s, err := jsonText(v)
	if err != nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.structured[s]
}

// quoteDepth is how many encodings deep a value is looked for: an
// adapter's answer echoes it as JSON, an error quotes that answer with %q,
// and a JSON event carries the error.
const quoteDepth = 3

// Forms returns the texts a value takes in gcompose's outputs: the value
// itself and what any nesting of up to quoteDepth of these encodings makes
// of it, each without its quotes:
//   - JSON, with HTML escaping (json.Marshal: "<" as \u003c) and without
//     (JSON events, summaries, plans, diff, state show, interpolation);
//   - Go's %q (errors quoting a value: a config that breaks a pattern, an
//     adapter's answer that is not JSON);
//   - the JSON Schema validator's quoting ('...', %q with \" unescaped and
//     ' escaped: a config that breaks a format).
//
// Most values have a few distinct forms; a value with none of the
// characters these encodings escape has one.
func Forms(v string) []string {
	seen := map[string]bool{v: true}
	forms := []string{v}
	level := []string{v}
	for range quoteDepth {
		var next []string
		for _, f := range level {
			for _, e := range quotings(f) {
				if !seen[e] {
					seen[e] = true
					forms = append(forms, e)
					next = append(next, e)
				}
			}
		}
		level = next
	}
	return forms
}

// quotings returns what the ways our outputs quote a string make of s,
// each without its quotes.
func quotings(s string) [4]string {
	html, _ := json.Marshal(s)
	plain, _ := jsonText(s)
	goq := strconv.Quote(s)
	goq = goq[1 : len(goq)-1]
	return [4]string{
		string(html[1 : len(html)-1]),
		plain[1 : len(plain)-1],
		goq,
		// santhosh-tekuri/jsonschema's quote: '...'
		strings.ReplaceAll(strings.ReplaceAll(goq, `\"`, `"`), `'`, `\'`),
	}
}

// jsonText is v's compact JSON without HTML escaping, as our outputs write
// it.
func jsonText(v any) (string, error) {
	var b strings.Builder
	if err := jsonout.Line(&b, v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

func (r *Redactor) addPattern(p string) {
	if p == "" || r.set[p] {
		return
	}
	r.set[p] = true
	r.patterns++
	l := append(r.byFirst[p[0]], p)
	sort.Slice(l, func(i, j int) bool { return len(l[i]) > len(l[j]) })
	r.byFirst[p[0]] = l
	r.maxLen = max(r.maxLen, len(p))
}

// Len is the number of patterns masked (0: nothing is secret).
func (r *Redactor) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.patterns
}

// Contains reports whether s holds a secret value.
func (r *Redactor) Contains(s string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i := 0; i < len(s); i++ {
		for _, p := range r.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], p) {
				return true
			}
		}
	}
	return false
}

// Redact returns s with every secret value replaced by Mask.
func (r *Redactor) Redact(s string) string {
	var b strings.Builder
	r.redact(&b, s, true)
	return b.String()
}

// redact writes s with secrets masked to b, scanning left to right and
// masking the longest secret starting at each position. Unless final, it
// stops at the first position where s ends inside what could still become a
// secret, and returns the bytes of s consumed: the caller keeps the rest for
// the next write.
func (r *Redactor) redact(b *strings.Builder, s string, final bool) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	i := 0
	start := 0 // first byte not yet copied
	for i < len(s) {
		cands := r.byFirst[s[i]]
		matched := 0
		for _, p := range cands { // longest first
			rest := s[i:]
			if len(rest) < len(p) {
				if !final && strings.HasPrefix(p, rest) {
					// s may end in the middle of p: wait for more.
					b.WriteString(s[start:i])
					return i
				}
				continue
			}
			if strings.HasPrefix(rest, p) {
				matched = len(p)
				break
			}
		}
		if matched > 0 {
			b.WriteString(s[start:i])
			b.WriteString(Mask)
			i += matched
			start = i
			continue
		}
		i++
	}
	b.WriteString(s[start:])
	return len(s)
}

// Writer returns w wrapped so that every secret value written through it,
// in one write or split across several, comes out as Mask. Call Flush when
// done: bytes that could begin a secret are held back until the next write
// shows they do not.
func (r *Redactor) Writer(w io.Writer) *Writer { return &Writer{r: r, w: w} }

// Writer is an io.Writer that masks secret values (see Redactor.Writer).
type Writer struct {
	mu      sync.Mutex
	r       *Redactor
	w       io.Writer
	pending string
}

// Write masks and forwards p. It reports len(p) written unless the
// underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.pending + string(p)
	var b strings.Builder
	n := w.r.redact(&b, s, false)
	w.pending = s[n:]
	if b.Len() > 0 {
		if _, err := io.WriteString(w.w, b.String()); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes what was held back.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == "" {
		return nil
	}
	var b strings.Builder
	w.r.redact(&b, w.pending, true)
	w.pending = ""
	_, err := io.WriteString(w.w, b.String())
	return err
}

// Unwrap returns the writer w writes to (gcompose state show
// --show-secrets prints there).
func (w *Writer) Unwrap() io.Writer { return w.w }

// MaskTree returns a copy of a JSON-like value where every string holding a
// secret, every secret that is not a string (AddValue), and every
// encrypted envelope, is replaced by Mask as a whole.
func (r *Redactor) MaskTree(v any) any {
	switch x := v.(type) {
	case string:
		if r.Contains(x) {
			return Mask
		}
		return x
	case map[string]any:
		if _, ok := envelope(x); ok || r.isStructuredSecret(x) {
			return Mask
		}
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = r.MaskTree(e)
		}
		return m
	case []any:
		if r.isStructuredSecret(x) {
			return Mask
		}
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = r.MaskTree(e)
		}
		return l
	}
	return v
}

// MaskMap is MaskTree for a map (nil stays nil).
func (r *Redactor) MaskMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return r.MaskTree(m).(map[string]any)
}
