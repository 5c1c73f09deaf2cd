package protocol_test

import (
	"testing"

	"github.com/gcompose/gcompose/protocol"
)

// A sweep with only terminates the listed orphans and reports the others
// (the leftover steps of an approved plan are deleted one by one); without
// only, every orphan; a dry run (or no sweep question), none.
func TestSweepTerminates(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    *protocol.SweepRequest
		want map[string]bool
	}{
		{"no question", nil, map[string]bool{"a": false, "b": false}},
		{"a dry run", &protocol.SweepRequest{Only: []string{"a"}}, map[string]bool{"a": false, "b": false}},
		{"every orphan", &protocol.SweepRequest{Terminate: true}, map[string]bool{"a": true, "b": true}},
		{"only a", &protocol.SweepRequest{Terminate: true, Only: []string{"a"}}, map[string]bool{"a": true, "b": false}},
	} {
		for id, want := range tc.want {
			if got := tc.q.Terminates(id); got != want {
				t.Errorf("%s: Terminates(%q) = %v, want %v", tc.name, id, got, want)
			}
		}
	}
}
