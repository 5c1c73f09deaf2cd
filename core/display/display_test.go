package display

import (
	"reflect"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/protocol"
)

var (
	created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	updated = created.Add(time.Hour)
)

func testDoc() *state.Document {
	doc := state.NewDocument("shop")
	for _, r := range []*state.Resource{
		{Name: "services.web", Type: "svc", Status: state.StatusActive, CreatedAt: created, UpdatedAt: updated,
			State: map[string]any{"network_node": map[string]any{"ip": "192.168.0.3"}, "agreement": map[string]any{"provider_name": "node-1"}}},
		{Name: "services.db", Type: "svc", Status: state.StatusActive, UpdatedAt: updated,
			State: map[string]any{"network_node": map[string]any{"ip": "192.168.0.2"}}},
		{Name: "resources.proxy-web", Type: "proxy", Status: state.StatusActive, CreatedAt: created,
			State: map[string]any{"url": "http://127.0.0.1:4000/", "service": "services.web"}},
		{Name: "resources.site", Type: "site", Status: state.StatusActive,
			State: map[string]any{"links": []any{"https://a.example/", "https://b.example/"}, "port": 8080.0}},
		{Name: "resources.half", Type: "site", Status: state.StatusPending, Pending: &state.Operation{Kind: state.OpCreate, Action: "create"},
			State: map[string]any{"links": []any{"https://half.example/", "https://half2.example/"}}},
		{Name: "resources.plain", Type: "plain", Status: state.StatusActive, State: map[string]any{"url": "http://not-declared/"}},
	} {
		doc.Resources[r.Name] = r
	}
	return doc
}

func testSummaries(image string) *protocol.Summary {
	switch image {
	case "svc":
		return &protocol.Summary{IP: "/network_node/ip", Provider: "/agreement/provider_name"}
	case "proxy":
		return &protocol.Summary{URL: "/url", For: "/service"}
	case "site":
		return &protocol.Summary{URL: "/links/1", IP: "/port"}
	}
	return nil
}

func TestEndpoints(t *testing.T) {
	got := Endpoints(testDoc(), testSummaries)
	want := []Endpoint{
		{Resource: "resources.site", URL: "https://b.example/"},
		{Resource: "services.web", URL: "http://127.0.0.1:4000/", Via: "resources.proxy-web"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("endpoints:\n got %+v\nwant %+v", got, want)
	}
}

func TestRows(t *testing.T) {
	got := Rows(testDoc(), testSummaries)
	want := []Row{
		{Resource: "resources.half", Type: "site", Status: state.StatusPending, Pending: "create create", URL: "https://half2.example/"},
		{Resource: "resources.plain", Type: "plain", Status: state.StatusActive},
		{Resource: "resources.proxy-web", Type: "proxy", Status: state.StatusActive, URL: "http://127.0.0.1:4000/", Since: created},
		{Resource: "resources.site", Type: "site", Status: state.StatusActive, IP: "8080", URL: "https://b.example/"},
		{Resource: "services.db", Type: "svc", Status: state.StatusActive, IP: "192.168.0.2", Since: updated},
		{Resource: "services.web", Type: "svc", Status: state.StatusActive, Provider: "node-1", IP: "192.168.0.3", URL: "http://127.0.0.1:4000/", Since: created},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %+v\nwant %+v", got, want)
	}
}

func TestLookup(t *testing.T) {
	v := map[string]any{"a/b": map[string]any{"~c": []any{"x", "y"}}, "": 1.0}
	for _, tc := range []struct {
		ptr  string
		want any
		ok   bool
	}{
		{"/a~1b/~0c/1", "y", true},
		{"/", 1.0, true},
		{"/a~1b/~0c/2", nil, false},
		{"/a~1b/~0c/-1", nil, false},
		{"/nope", nil, false},
		{"no-slash", nil, false},
	} {
		got, ok := Lookup(v, tc.ptr)
		if ok != tc.ok || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%q) = %v, %v; want %v, %v", tc.ptr, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAge(t *testing.T) {
	now := created
	for _, tc := range []struct {
		ago  time.Duration
		want string
	}{{5 * time.Second, "5s"}, {12 * time.Minute, "12m"}, {3 * time.Hour, "3h"}, {47 * time.Hour, "47h"}, {72 * time.Hour, "3d"}, {-time.Second, "0s"}} {
		if got := Age(now, now.Add(-tc.ago)); got != tc.want {
			t.Errorf("Age(%v ago) = %q, want %q", tc.ago, got, tc.want)
		}
	}
	if Age(now, time.Time{}) != "" {
		t.Error("a zero time has no age")
	}
}
