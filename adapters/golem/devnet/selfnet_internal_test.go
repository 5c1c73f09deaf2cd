package devnet

import "testing"

func TestVPNNetPrefix(t *testing.T) {
	for _, tc := range []struct {
		name, instance string
		selfNets       []string
		want           string
	}{
		{"on the host", "gcompose-devnet", nil, "gcompose-devnet-gcompose-devnet"},
		{"compose default: the project network is a prefix", "gcompose-devnet", []string{"gcompose-devnet"}, "gcompose-devnet-gcompose-devnet"},
		{"a project named after devnet sorts before", "abc", []string{"abc", "bridge"}, "gcompose-devnet-abc"},
		{"a project that sorts after gcompose-devnet-", "gcompose-doctest-7", []string{"gcompose-doctest-7"}, "gcompose-doctest-7-vpn"},
		{"the last of several", "x", []string{"zeta", "alpha"}, "zeta-vpn"},
		{"a network that starts with the prefix and a dash", "i", []string{"gcompose-devnet-i-ffff"}, "gcompose-devnet-i-ffff-vpn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := vpnNetPrefix(tc.instance, tc.selfNets)
			if got != tc.want {
				t.Fatalf("vpnNetPrefix(%q, %q) = %q, want %q", tc.instance, tc.selfNets, got, tc.want)
			}
			// What the rule is for: every VPN network sorts after each of the container's own.
			for _, id := range []string{"000000000000", "ffffffffffff"} {
				for _, n := range tc.selfNets {
					if v := got + "-" + id; v <= n {
						t.Errorf("VPN network %q sorts before or with the container's network %q", v, n)
					}
				}
			}
		})
	}
}
