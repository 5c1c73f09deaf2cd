package devnet

import (
	"net/netip"
	"testing"
)

// TestVPNMAC: a node's MAC on a VPN is 90:13 and its VPN address, as ya-runtime-vm gives a VM's VPN
// interface (runtime/init-container/src/network.c net_if_addr_to_hw_addr).
func TestVPNMAC(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"192.168.77.38", "90:13:c0:a8:4d:26"},
		{"10.0.0.2", "90:13:0a:00:00:02"},
		{"255.255.255.254", "90:13:ff:ff:ff:fe"},
	} {
		if got := vpnMAC(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("vpnMAC(%s) = %s, want %s", c.addr, got, c.want)
		}
	}
}
