package network

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		ip, mask, owner     string
		prefix, mk, ownerIP string
		err                 string
	}{
		{ip: "192.168.0.0/24", prefix: "192.168.0.0/24", mk: "255.255.255.0", ownerIP: "192.168.0.1"},
		{ip: "192.168.0.1/24", prefix: "192.168.0.0/24", mk: "255.255.255.0", ownerIP: "192.168.0.1"},
		{ip: "192.168.0.7/24", prefix: "192.168.0.0/24", mk: "255.255.255.0", ownerIP: "192.168.0.7"},
		{ip: "10.1.0.0/16", owner: "10.1.2.3", prefix: "10.1.0.0/16", mk: "255.255.0.0", ownerIP: "10.1.2.3"},
		{ip: "10.1.0.0", mask: "255.255.255.128", prefix: "10.1.0.0/25", mk: "255.255.255.128", ownerIP: "10.1.0.1"},
		{ip: "10.1.0.0", prefix: "10.1.0.0/24", mk: "255.255.255.0", ownerIP: "10.1.0.1"},
		{ip: "10.1.0.0/30", prefix: "10.1.0.0/30", mk: "255.255.255.252", ownerIP: "10.1.0.1"},
		{ip: "10.1.0.0/31", err: "at most /30"},
		{ip: "10.1.0.0/24", mask: "255.255.0.0", err: "disagree"},
		{ip: "10.1.0.0", mask: "255.0.255.0", err: "not contiguous"},
		{ip: "10.1.0.0/24", owner: "10.2.0.1", err: "not an address of"},
		{ip: "10.1.0.255/24", err: "broadcast"},
		{ip: "fd00::/64", err: "IPv4"},
		{ip: "nonsense", err: "network ip"},
	} {
		r, err := ParseRange(tc.ip, tc.mask, tc.owner)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseRange(%q, %q, %q) = %v, want error with %q", tc.ip, tc.mask, tc.owner, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseRange(%q, %q, %q): %v", tc.ip, tc.mask, tc.owner, err)
			continue
		}
		if r.Prefix.String() != tc.prefix || r.Mask() != tc.mk || r.OwnerIP.String() != tc.ownerIP {
			t.Errorf("ParseRange(%q, %q, %q) = %s %s owner %s, want %s %s owner %s", tc.ip, tc.mask, tc.owner, r.Prefix, r.Mask(), r.OwnerIP, tc.prefix, tc.mk, tc.ownerIP)
		}
	}
}

func TestPickIP(t *testing.T) {
	r24, _ := ParseRange("192.168.0.1/24", "", "")
	r30, _ := ParseRange("10.0.0.0/30", "", "")
	for _, tc := range []struct {
		name        string
		r           Range
		planned     string
		used, avoid []string
		want, err   string
	}{
		{name: "first free after the requestor", r: r24, used: []string{"192.168.0.1"}, want: "192.168.0.2"},
		{name: "skips taken addresses", r: r24, used: []string{"192.168.0.1", "192.168.0.2", "192.168.0.3"}, want: "192.168.0.4"},
		{name: "fills a hole", r: r24, used: []string{"192.168.0.1", "192.168.0.3"}, want: "192.168.0.2"},
		{name: "planned", r: r24, planned: "192.168.0.10", used: []string{"192.168.0.1"}, want: "192.168.0.10"},
		{name: "planned taken", r: r24, planned: "192.168.0.1", used: []string{"192.168.0.1"}, err: "already taken"},
		{name: "planned outside", r: r24, planned: "192.168.1.10", err: "not a host address"},
		{name: "planned network address", r: r24, planned: "192.168.0.0", err: "not a host address"},
		{name: "planned broadcast", r: r24, planned: "192.168.0.255", err: "not a host address"},
		{name: "planned garbage", r: r24, planned: "x", err: "planned ip"},
		{name: "a rebuild avoids its old address", r: r24, used: []string{"192.168.0.1"}, avoid: []string{"192.168.0.2"}, want: "192.168.0.3"},
		{name: "but takes it back when nothing else is free", r: r30, used: []string{"10.0.0.1"}, avoid: []string{"10.0.0.2"}, want: "10.0.0.2"},
		{name: "full", r: r30, used: []string{"10.0.0.1", "10.0.0.2"}, err: "no free address"},
		{name: "never the broadcast address", r: r30, used: []string{"10.0.0.1"}, want: "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PickIP(tc.r, tc.planned, tc.used, tc.avoid)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("PickIP = %q, %v; want error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("PickIP = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestMaskRoundTrip(t *testing.T) {
	for bits := 0; bits <= 32; bits++ {
		b, err := MaskBits(DottedMask(bits))
		if err != nil || b != bits {
			t.Fatalf("bits %d: %s -> %d, %v", bits, DottedMask(bits), b, err)
		}
	}
}
