// Package source holds positions in descriptor files and the diagnostics that
// point at them, so every layer reports problems as file:line:col: message.
package source

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a place in a descriptor file. Line and Col are 1-based; a zero Line
// means the position is unknown (e.g. a value given on the command line).
type Pos struct {
	File string `json:"file,omitempty" yaml:"file,omitempty"`
	Line int    `json:"line,omitempty" yaml:"line,omitempty"`
	Col  int    `json:"col,omitempty" yaml:"col,omitempty"`
}

func (p Pos) IsValid() bool { return p.Line > 0 }

func (p Pos) String() string {
	switch {
	case p.File == "" && p.Line == 0:
		return "-"
	case p.Line == 0:
		return p.File
	default:
		return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
	}
}

// Severity distinguishes problems that stop a command from those that only warn.
type Severity int

const (
	Error Severity = iota
	Warning
)

// Diagnostic is one problem found at one place.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Message  string
}

func (d Diagnostic) String() string {
	if d.Severity == Warning {
		return fmt.Sprintf("%s: warning: %s", d.Pos, d.Message)
	}
	return fmt.Sprintf("%s: %s", d.Pos, d.Message)
}

// Diagnostics collects every problem found so a user fixes them all in one pass
// instead of one per run. It implements error when it holds at least one Error.
type Diagnostics []Diagnostic

func (ds *Diagnostics) Errorf(p Pos, format string, args ...any) {
	*ds = append(*ds, Diagnostic{Pos: p, Severity: Error, Message: fmt.Sprintf(format, args...)})
}

func (ds *Diagnostics) Warnf(p Pos, format string, args ...any) {
	*ds = append(*ds, Diagnostic{Pos: p, Severity: Warning, Message: fmt.Sprintf(format, args...)})
}

func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Errors returns only the Error-severity diagnostics.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(Error) }

// Warnings returns only the Warning-severity diagnostics.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(Warning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Sort orders diagnostics by file, line and column so output is stable.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Err returns the diagnostics as an error when any of them is an Error, else nil.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return ds
}

func (ds Diagnostics) Error() string {
	lines := make([]string, 0, len(ds))
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	return strings.Join(lines, "\n")
}
