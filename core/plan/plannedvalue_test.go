package plan

import (
	"testing"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// Which references a planned output answers: at or below a planned
// pointer, the most specific one, never an object only partly planned nor
// a field also known only after apply.
func TestPlannedValue(t *testing.T) {
	name := func(n string) expr.Step { return expr.Step{Name: n} }
	index := func(i int) expr.Step { return expr.Step{IsIndex: true, Index: i} }
	values := map[string]any{
		"/network_node/ip": "192.168.77.2",
		"/ports":           []any{80.0, 81.0},
		"/a~1b":            "slash",
		"/conf":            map[string]any{"x": map[string]any{"y": 1.0}},
		"/conf/x":          map[string]any{"y": 2.0},
		"/agreement/id":    "planned but unknown too",
	}
	unknown := []string{"/agreement", "/activity"}
	for _, tc := range []struct {
		name  string
		field []expr.Step
		want  any // nil: no value
	}{
		{"exact", []expr.Step{name("network_node"), name("ip")}, "192.168.77.2"},
		{"object only partly planned", []expr.Step{name("network_node")}, nil},
		{"sibling not planned", []expr.Step{name("network_node"), name("node_id")}, nil},
		{"index below a planned list", []expr.Step{name("ports"), index(1)}, 81.0},
		{"index past the list", []expr.Step{name("ports"), index(2)}, nil},
		{"escaped pointer", []expr.Step{name("a/b")}, "slash"},
		{"the most specific pointer wins", []expr.Step{name("conf"), name("x"), name("y")}, 2.0},
		{"unknown wins over planned", []expr.Step{name("agreement"), name("id")}, nil},
		{"unknown below", []expr.Step{name("activity"), name("id")}, nil},
		{"whole outputs", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := plannedValue(values, unknown, tc.field)
			if ok != (tc.want != nil) || !jsonvalue.Equal(got, tc.want) {
				t.Fatalf("got %v (%v), want %v", got, ok, tc.want)
			}
		})
	}
	if v, ok := plannedValue(map[string]any{"": map[string]any{"ip": "x"}}, nil, []expr.Step{name("ip")}); !ok || v != "x" {
		t.Fatalf("the whole state planned (\"\"): got %v %v", v, ok)
	}
}

// CheckPlanned holds a resource to what its adapter planned, except what
// it also said is known only after apply.
func TestCheckPlanned(t *testing.T) {
	s := &Step{Resource: "services.db", Planned: map[string]any{"/network_node/ip": "192.168.77.2", "/agreement/id": "?"}, Unknown: []string{"/agreement"}}
	if err := s.CheckPlanned(map[string]any{"network_node": map[string]any{"ip": "192.168.77.2"}, "agreement": map[string]any{"id": "a1"}}); err != nil {
		t.Fatalf("as planned: %v", err)
	}
	err := s.CheckPlanned(map[string]any{"network_node": map[string]any{"ip": "192.168.77.9"}})
	if err == nil || err.Error() != `its adapter planned the output /network_node/ip = "192.168.77.2", but after its actions it reports "192.168.77.9": what was planned with that value is held back (the adapter broke its promise: plan again)` {
		t.Fatalf("another address: %v", err)
	}
	if err := s.CheckPlanned(map[string]any{}); err == nil || err.(*UnplannedOutputError).Missing != true {
		t.Fatalf("no address: %v", err)
	}
}
