package devnet

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/network"
)

// TestMasqueradedOverlaps: the Docker networks whose masquerading rewrites what a host-run devnet's VPN
// nodes send each other are bridges with masquerading on whose range overlaps the VPN's.
func TestMasqueradedOverlaps(t *testing.T) {
	bridge := func(name, subnet string, internal bool, opts map[string]string) network.Summary {
		return network.Summary{Name: name, Driver: "bridge", Internal: internal, Options: opts,
			IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}}}
	}
	off := map[string]string{"com.docker.network.bridge.enable_ip_masquerade": "false"}
	nets := []network.Summary{
		bridge("compose-b", "192.168.64.0/20", false, nil), // Docker's pool after 172.17-31: holds 192.168.77.0/24
		bridge("compose-a", "192.168.77.0/24", false, map[string]string{"com.docker.network.bridge.name": "x"}),
		bridge("elsewhere", "192.168.80.0/20", false, nil),
		bridge("internal", "192.168.77.0/25", true, nil),
		bridge("vpn-bridge", "192.168.0.0/16", false, off),
		{Name: "macvlan", Driver: "macvlan", IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "192.168.77.0/24"}}}},
		{Name: "host", Driver: "host"},
		bridge("bad", "not a prefix", false, nil),
	}
	for _, tc := range []struct {
		vpn  string
		want []string
	}{
		{"192.168.77.0/24", []string{"compose-a (192.168.77.0/24)", "compose-b (192.168.64.0/20)"}},
		{"192.168.81.128/25", []string{"elsewhere (192.168.80.0/20)"}},
		{"10.213.41.0/24", nil},
	} {
		if got := masqueradedOverlaps(nets, netip.MustParsePrefix(tc.vpn)); !slices.Equal(got, tc.want) {
			t.Errorf("masqueradedOverlaps(%s) = %q, want %q", tc.vpn, got, tc.want)
		}
	}
}
