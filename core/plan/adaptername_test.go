package plan

import (
	"testing"

	"github.com/gcompose/gcompose/core/state"
)

func TestAdapterNameOf(t *testing.T) {
	cases := []struct {
		name, addr string
		old        *state.Resource
		want       string
	}{
		{"new resource: the descriptor's name", "resources.n0", nil, "n0"},
		{"new instance", "services.web[1]", nil, "web-1"},
		{"recorded name kept", "resources.n0", &state.Resource{Name: "resources.n0", AdapterName: "n0", Status: state.StatusActive}, "n0"},
		// A state written before names were recorded: its adapter made
		// its objects under the address, and keeps receiving it.
		{"old state keeps the address", "resources.n0", &state.Resource{Name: "resources.n0", Status: state.StatusActive}, "resources.n0"},
		{"old pending create keeps the address", "services.web", &state.Resource{Name: "services.web", Status: state.StatusPending}, "services.web"},
		{"terminated: made anew", "resources.n0", &state.Resource{Name: "resources.n0", Status: state.StatusTerminated}, "n0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AdapterNameOf(tc.addr, tc.old); got != tc.want {
				t.Fatalf("AdapterNameOf(%q) = %q, want %q", tc.addr, got, tc.want)
			}
		})
	}
}
