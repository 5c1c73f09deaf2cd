package network

import (
	"fmt"
	"net/netip"
	"strings"
)

// Range is a VPN's address range as the Net API knows it: the network
// address, its dotted mask, and the requestor's own address in it.
type Range struct {
	Prefix  netip.Prefix
	OwnerIP netip.Addr
}

// Mask is the prefix's dotted mask ("255.255.255.0").
func (r Range) Mask() string { return DottedMask(r.Prefix.Bits()) }

// IP is the network address ("192.168.0.0").
func (r Range) IP() string { return r.Prefix.Addr().String() }

// ParseRange reads a GAP-16 network ip: a CIDR ("192.168.0.0/24"), a host
// with its prefix ("192.168.0.1/24": the same network, and .1 becomes the
// requestor's address), or a bare address with a dotted mask. ownerIP, when
// set, overrides the requestor's address; otherwise it is the host of a
// host/prefix form, else the first host of the range.
func ParseRange(ip, mask, ownerIP string) (Range, error) {
	ip = strings.TrimSpace(ip)
	var p netip.Prefix
	var host netip.Addr
	if strings.Contains(ip, "/") {
		pp, err := netip.ParsePrefix(ip)
		if err != nil {
			return Range{}, fmt.Errorf("network ip %q: %w", ip, err)
		}
		p, host = pp.Masked(), pp.Addr()
	} else {
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return Range{}, fmt.Errorf("network ip %q: %w", ip, err)
		}
		bits := 24
		if mask != "" {
			b, err := MaskBits(mask)
			if err != nil {
				return Range{}, err
			}
			bits = b
		}
		p, host = netip.PrefixFrom(a, bits).Masked(), a
	}
	if !p.Addr().Is4() {
		return Range{}, fmt.Errorf("network ip %q: only IPv4 ranges are supported by the Net API", ip)
	}
	if p.Bits() > 30 {
		return Range{}, fmt.Errorf("network ip %q: a /%d leaves no room for the requestor and a node (at most /30)", ip, p.Bits())
	}
	if mask != "" && strings.Contains(ip, "/") {
		b, err := MaskBits(mask)
		if err != nil {
			return Range{}, err
		}
		if b != p.Bits() {
			return Range{}, fmt.Errorf("network ip %q and mask %q disagree", ip, mask)
		}
	}
	r := Range{Prefix: p}
	switch {
	case ownerIP != "":
		a, err := netip.ParseAddr(ownerIP)
		if err != nil || !p.Contains(a) {
			return Range{}, fmt.Errorf("owner_ip %q is not an address of %s", ownerIP, p)
		}
		r.OwnerIP = a
	case host != p.Addr():
		r.OwnerIP = host
	default:
		r.OwnerIP = p.Addr().Next()
	}
	if !r.usable(r.OwnerIP) {
		return Range{}, fmt.Errorf("owner ip %s is the network or broadcast address of %s", r.OwnerIP, p)
	}
	return r, nil
}

// usable tells whether a is a host address of the range (neither the
// network nor the broadcast address).
func (r Range) usable(a netip.Addr) bool {
	return r.Prefix.Contains(a) && a != r.Prefix.Addr() && a != Broadcast(r.Prefix)
}

// Broadcast is the last address of p.
func Broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	hostBits := 32 - p.Bits()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << hostBits) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// DottedMask turns a prefix length into "255.255.255.0".
func DottedMask(bits int) string {
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	return fmt.Sprintf("%d.%d.%d.%d", byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// MaskBits turns "255.255.255.0" into 24; a non-contiguous mask is an error.
func MaskBits(mask string) (int, error) {
	a, err := netip.ParseAddr(strings.TrimSpace(mask))
	if err != nil || !a.Is4() {
		return 0, fmt.Errorf("mask %q: want a dotted IPv4 mask", mask)
	}
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	bits := 0
	for v&(1<<31) != 0 {
		bits++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("mask %q is not contiguous", mask)
	}
	return bits, nil
}

// PickIP chooses a node's address: planned when set (it must be a free host
// address of the range), else the first free host address, skipping the
// addresses in avoid when another one is free (a rebuilt node does not take
// back the address it just released, so references to it change and stale
// connections cannot reach the new node). used are the addresses already
// taken (the requestor's, other nodes', the gateway).
func PickIP(r Range, planned string, used, avoid []string) (string, error) {
	taken := map[netip.Addr]bool{}
	for _, u := range used {
		if a, err := netip.ParseAddr(u); err == nil {
			taken[a] = true
		}
	}
	if planned != "" {
		a, err := netip.ParseAddr(strings.TrimSpace(planned))
		if err != nil {
			return "", fmt.Errorf("planned ip %q: %w", planned, err)
		}
		if !r.usable(a) {
			return "", fmt.Errorf("planned ip %s is not a host address of %s", a, r.Prefix)
		}
		if taken[a] {
			return "", fmt.Errorf("planned ip %s of %s is already taken", a, r.Prefix)
		}
		return a.String(), nil
	}
	skip := map[netip.Addr]bool{}
	for _, u := range avoid {
		if a, err := netip.ParseAddr(u); err == nil {
			skip[a] = true
		}
	}
	var fallback netip.Addr
	for a := r.Prefix.Addr().Next(); r.usable(a); a = a.Next() {
		if taken[a] {
			continue
		}
		if skip[a] {
			if !fallback.IsValid() {
				fallback = a
			}
			continue
		}
		return a.String(), nil
	}
	if fallback.IsValid() {
		return fallback.String(), nil
	}
	return "", fmt.Errorf("no free address left in %s", r.Prefix)
}
