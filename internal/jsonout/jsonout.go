// Package jsonout is how gcompose writes JSON for people and programs to
// read: text as typed. encoding/json escapes <, > and & by default (for
// JSON inlined in HTML), which turns a shell command such as
// "run > out 2> err &" into "run \u003e out 2\u003e err \u0026": unreadable
// in a CI log, and missed by a grep. The CLI's JSON outputs go through here so
// that none drifts back to the default, and so do the values core/plan,
// core/jsondiff, core/expr and core/secret print as JSON text.
package jsonout

import (
	"encoding/json"
	"io"
)

// Line writes v as one line of compact JSON (JSON lines, an HTTP answer),
// in one Write: lines written by several goroutines to one synchronised
// writer do not interleave.
func Line(w io.Writer, v any) error {
	return encoder(w).Encode(v)
}

// Indented writes v indented by two spaces, as people and jq read it,
// with a final newline.
func Indented(w io.Writer, v any) error {
	enc := encoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func encoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}
