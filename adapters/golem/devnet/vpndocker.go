package devnet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// vpn is a Net API network, backed by two Docker networks of its own. They do not carry the VPN's
// range: real yagna lets any number of requestors (and apps) use one range, say 192.168.77.0/24, at
// once, and Docker refuses two networks with overlapping ranges ("Pool overlaps"). Each gets a free /24
// of bridgeRange instead, and each node's container is given its VPN address when it starts.
//
// The link the nodes share is a macvlan network (bridge mode) hung off the Linux bridge of an internal
// bridge network, the anchor (createVPNNetworks); every node joins both. Its VPN address goes on its
// macvlan interface (the VPN's range is then a connected route there), so what nodes send each other
// with their VPN addresses goes from one macvlan to the other inside the kernel's macvlan driver and
// never through the Docker host's netfilter. On a bridge it would: the host filters bridged IPv4
// (bridge-nf-call-iptables, which Docker needs), and any other Docker network whose masqueraded range
// overlaps the VPN's (Docker hands out 192.168.x.0/20 ranges once 172.17-31 are taken) has a MASQUERADE
// rule that rewrites a node's connection to another node as coming from the bridge's gateway, so the
// connection never completes. As on yagna, where VPN packets travel between the nodes' exe-units and never
// meet the host's firewall, nothing on the host may touch them.
//
// The anchor does the rest. Its ports (the nodes' interfaces on it) give the Linux bridge the carrier
// without which every macvlan on it is down. And it is where the devnet reaches the nodes for the TCP
// tunnels: a macvlan's parent cannot talk to its macvlans, so the host, whose interface on the anchor is
// the Linux bridge itself, cannot reach a node's macvlan interface. The tunnels dial the node's address
// on the anchor instead: from the host, where the bridge holds the anchor's gateway address, and from the
// devnet's container, which joins the anchor; the datapath is the same wherever the devnet runs. Each
// node answers ARP only for the addresses of the interface asked on (arp_ignore, deploy): its VPN
// address is local on every interface, and an answer on the anchor would send the other nodes' VPN
// traffic through the bridge.
type vpn struct {
	id, ip, mask string
	gateway      string
	prefix       netip.Prefix
	linkName     string // the macvlan network that carries the VPN's traffic between nodes
	linkID       string
	anchorName   string // the internal bridge network the macvlan network hangs off, where the devnet dials nodes
	anchorID     string
	anchorRange  netip.Prefix // the anchor's range, from bridgeRange
	addresses    []string
	nodes        map[string][]string // node id → its addresses (yagna lets a node hold several)
	created      time.Time
}

// bridgeRange holds the ranges of the devnet's Docker networks, one /24 each; a /16 that home and office
// networks rarely use (10.199.x.y).
var bridgeRange = netip.MustParsePrefix("10.199.0.0/16")

// createOnFreeRange creates a Docker network on a free /24 of bridgeRange that does not overlap the VPN's
// own range; Docker refuses a range in use, so it tries others.
func (s *Server) createOnFreeRange(ctx context.Context, name string, vpnRange netip.Prefix, opts func(netip.Prefix) network.CreateOptions) (string, netip.Prefix, error) {
	base := bridgeRange.Addr().As4()
	start := rand.IntN(256)
	var lastErr error
	for i := 0; i < 256; i++ {
		third := byte((start + i) % 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], third, 0}), 24)
		if p.Overlaps(vpnRange) {
			continue
		}
		resp, err := s.docker.NetworkCreate(ctx, name, opts(p))
		if err == nil {
			return resp.ID, p, nil
		}
		if errors.Is(err, enginecall.ErrHung) {
			return "", netip.Prefix{}, fmt.Errorf("creating Docker network %s: %w", name, err)
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlaps") {
			break
		}
	}
	return "", netip.Prefix{}, fmt.Errorf("creating Docker network %s: no free /24 in %s: %w", name, bridgeRange, lastErr)
}

// vpnBridgeDevice names the Linux bridge behind a VPN's anchor network, the parent of its macvlan network
// (at most 15 characters, as every interface name).
func vpnBridgeDevice(vpnID string) string { return "gcv" + vpnID[:12] }

// createVPNNetworks creates the Docker networks behind v (see vpn) and, when the devnet runs in a
// container, joins it to the anchor; on failure it removes what it created.
func (s *Server) createVPNNetworks(ctx context.Context, v *vpn, labels map[string]string) error {
	undo := func() { _ = s.removeVPNNetworks(context.WithoutCancel(ctx), v) }
	// Internal: only the nodes and the devnet use it, on its own range; nothing is routed from it. The
	// Linux bridge still holds the gateway address, through which a devnet on the host dials the nodes
	// (as on every Docker Engine but 25.0.0-25.0.3, moby/moby#47481).
	dev := vpnBridgeDevice(v.id)
	anchor, anchorRange, err := s.createOnFreeRange(ctx, v.anchorName, v.prefix, func(p netip.Prefix) network.CreateOptions {
		return network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: p.String()}}},
			Options: map[string]string{"com.docker.network.bridge.name": dev,
				"com.docker.network.bridge.enable_ip_masquerade": "false"}}
	})
	if err != nil {
		return err
	}
	v.anchorID, v.anchorRange = anchor, anchorRange
	// Bridge mode: the macvlans on one parent reach each other directly. Not Internal: Docker puts
	// internal macvlan networks on a dummy parent of their own; nothing routes out of it anyway (joinVPNs
	// deletes each node's default route).
	link, _, err := s.createOnFreeRange(ctx, v.linkName, v.prefix, func(p netip.Prefix) network.CreateOptions {
		return network.CreateOptions{Driver: "macvlan", Labels: labels,
			IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: p.String()}}},
			Options: map[string]string{"parent": dev, "macvlan_mode": "bridge"}}
	})
	if err != nil {
		undo()
		return err
	}
	v.linkID = link
	if s.self != "" {
		if err := s.joinSelf(ctx, anchor); err != nil {
			undo()
			return err
		}
	}
	return nil
}

// joinSelf connects the devnet's container to a VPN's anchor network: below the container's own network
// in the choice of its default gateway (vpnNetPrefix), by priority on engines that have one (API 1.48),
// by name on all.
func (s *Server) joinSelf(ctx context.Context, netID string) error {
	if err := s.docker.NetworkConnect(ctx, netID, s.self, &network.EndpointSettings{GwPriority: -1}); err != nil {
		return fmt.Errorf("joining the devnet container to Docker network %s: %w", netID, err)
	}
	return nil
}

// removeVPNNetworks removes the Docker networks behind v, in the safe order (removeNetworks): its nodes
// leave first, then the macvlan network goes, then the bridge it hangs off.
func (s *Server) removeVPNNetworks(ctx context.Context, v *vpn) error {
	var ids []string
	for _, id := range []string{v.linkID, v.anchorID} {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return s.removeNetworks(ctx, ids)
}

// endpointsGoneWait bounds the wait for a network's endpoints to be gone after its containers left.
const endpointsGoneWait = 15 * time.Second

// removeNetworks removes Docker networks in the order that gives Docker 20.10's libnetwork the fewest
// concurrent endpoint changes to race on (see engine): every container still on them leaves first, one
// at a time; then the engine must show no endpoint on any of them (an endpoint's deletion finishes in
// the controller's watch loop after the call that caused it returned); only then are they removed, in
// the order given (a VPN's macvlan network before the anchor bridge it hangs off). An engine that does
// not answer ends it at once, with that error.
func (s *Server) removeNetworks(ctx context.Context, ids []string) error {
	var errs []error
	live := ids[:0:0]
	for _, id := range ids {
		info, err := s.docker.NetworkInspect(ctx, id, network.InspectOptions{})
		if errdefs.IsNotFound(err) {
			continue
		}
		if errors.Is(err, enginecall.ErrHung) {
			return err
		}
		live = append(live, id)
		if err != nil {
			continue // its removal below says what is wrong
		}
		for cid := range info.Containers {
			err := s.docker.NetworkDisconnect(ctx, id, cid, true)
			if errors.Is(err, enginecall.ErrHung) {
				return err
			}
			if err != nil && !errdefs.IsNotFound(err) {
				s.log.Warn("disconnecting a container from a VPN network", "network", info.Name, "container", cid, "err", err)
			}
		}
	}
	deadline := time.Now().Add(endpointsGoneWait)
	for _, id := range live {
		for {
			info, err := s.docker.NetworkInspect(ctx, id, network.InspectOptions{})
			if errors.Is(err, enginecall.ErrHung) {
				return err
			}
			if err != nil || len(info.Containers) == 0 {
				break
			}
			if time.Now().After(deadline) {
				s.log.Warn("a VPN network still has endpoints; removing it anyway", "network", info.Name, "endpoints", len(info.Containers))
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, id := range live {
		err := s.docker.NetworkRemove(ctx, id)
		if errors.Is(err, enginecall.ErrHung) {
			return errors.Join(append(errs, err)...)
		}
		if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing Docker network %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// detachFromVPN disconnects a node's container from v's Docker networks. Only a hung engine is an error:
// the container may be gone already.
func (s *Server) detachFromVPN(ctx context.Context, v *vpn, containerID string) error {
	for _, netID := range []string{v.linkID, v.anchorID} {
		if err := s.docker.NetworkDisconnect(ctx, netID, containerID, true); errors.Is(err, enginecall.ErrHung) {
			return err
		}
	}
	return nil
}
