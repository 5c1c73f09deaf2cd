// Package display picks, from a deployed application's state, what people
// look for: each resource's endpoint (printed after a deploy), and the
// columns of gcompose ps. Which outputs those are is each adapter's to say,
// in its init answer (protocol.Summary), so nothing here knows any adapter.
package display

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/protocol"
)

// Summaries gives the Summary an adapter image declared, nil when it
// declared none or could not be asked.
type Summaries func(image string) *protocol.Summary

// Endpoint is one URL a deploy produced.
type Endpoint struct {
	// Resource is the resource the URL serves: the one that reports it,
	// or the one its For output names (a proxy's service).
	Resource string `json:"resource"`
	URL      string `json:"url"`
	// Via is the resource that reports the URL when it is not Resource.
	Via string `json:"via,omitempty"`
}

// Row is one line of gcompose ps.
type Row struct {
	Resource string       `json:"resource"`
	Type     string       `json:"type"`
	Status   state.Status `json:"status"`
	Pending  string       `json:"pending,omitempty"`
	Provider string       `json:"provider,omitempty"`
	IP       string       `json:"ip,omitempty"`
	URL      string       `json:"url,omitempty"`
	// Since is when the resource was created (or, in states written before
	// that was recorded, last changed).
	Since time.Time `json:"since"`
}

// Endpoints are the URLs of the active resources of doc, sorted by the
// resource they serve.
func Endpoints(doc *state.Document, sum Summaries) []Endpoint {
	var out []Endpoint
	for _, name := range doc.Names() {
		r := doc.Resources[name]
		s := sum(r.Type)
		if s == nil || s.URL == "" || r.Status != state.StatusActive {
			continue
		}
		url := text(r.State, s.URL)
		if url == "" {
			continue
		}
		e := Endpoint{Resource: name, URL: url}
		if s.For != "" {
			if target := text(r.State, s.For); target != "" && target != name {
				e.Resource, e.Via = target, name
			}
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Resource < out[j].Resource })
	return out
}

// Rows are the lines of gcompose ps: every resource of doc, with the
// provider, address and URL its adapter points at. A resource served by
// another's URL (a service behind its proxy) shows that URL.
func Rows(doc *state.Document, sum Summaries) []Row {
	urls := map[string]string{}
	for _, e := range Endpoints(doc, sum) {
		if _, ok := urls[e.Resource]; !ok {
			urls[e.Resource] = e.URL
		}
	}
	var out []Row
	for _, name := range doc.Names() {
		r := doc.Resources[name]
		row := Row{Resource: name, Type: r.Type, Status: r.Status, URL: urls[name], Since: r.CreatedAt}
		if row.Since.IsZero() {
			row.Since = r.UpdatedAt
		}
		if r.Pending != nil {
			row.Pending = string(r.Pending.Kind) + " " + r.Pending.Action
		}
		if s := sum(r.Type); s != nil {
			row.Provider, row.IP = text(r.State, s.Provider), text(r.State, s.IP)
			if row.URL == "" {
				row.URL = text(r.State, s.URL)
			}
		}
		out = append(out, row)
	}
	return out
}

// Age is how long ago t was, as Docker says it: 45s, 12m, 3h, 2d.
func Age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// text is the string or number at pointer in v, "" when there is none.
func text(v any, pointer string) string {
	x, ok := Lookup(v, pointer)
	if !ok {
		return ""
	}
	switch x := x.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int, int64, bool:
		return fmt.Sprint(x)
	}
	return ""
}

// Lookup finds the value a JSON pointer (RFC 6901) names in a decoded JSON
// value.
func Lookup(v any, pointer string) (any, bool) { return jsonpointer.Lookup(v, pointer) }
