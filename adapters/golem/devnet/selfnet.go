package devnet

import (
	"context"
	"fmt"
	"slices"
)

// vpnNetPrefix is what the Docker networks behind VPNs are named with: "<prefix>-<vpn id>".
//
// When the devnet runs in a container it joins every VPN's anchor network, so that tunnels can dial the nodes.
// Docker hands a container's default gateway, and with it the container's published ports, to the
// endpoint that sorts first; between endpoints of equal priority that are neither internal nor on
// docker_gwbridge, the one whose network name sorts first (moby/moby libnetwork/sandbox.go,
// Endpoint.Less: "ep.name <=> epj.name # bar < foo"). A VPN network named before the container's own
// network would take the published API port over, and Docker moves a port by restarting its proxy,
// which cuts every open connection: the request that created the VPN got EOF, and so did any long poll
// under way. So the names sort after every network the container is on when the devnet starts: the
// usual "gcompose-devnet-<instance>" when it already does (the compose project's network is named after
// the instance, "gcompose-devnet" by default), else the last of those names followed by "-vpn", which
// sorts after it as any string sorts after its own prefix.
func vpnNetPrefix(instance string, selfNets []string) string {
	prefix := "gcompose-devnet-" + instance
	if len(selfNets) == 0 {
		return prefix
	}
	last := slices.Max(selfNets)
	// Every "<prefix>-<id>" sorts after last exactly when "<prefix>-" does: either last is a prefix
	// of it, or they differ at a byte where it is the greater.
	if prefix+"-" > last {
		return prefix
	}
	return last + "-vpn"
}

// selfNetworks lists the networks the devnet's own container is on; none when it runs on the host.
func (s *Server) selfNetworks(ctx context.Context) ([]string, error) {
	if s.self == "" {
		return nil, nil
	}
	insp, err := s.docker.ContainerInspect(ctx, s.self)
	if err != nil {
		return nil, fmt.Errorf("inspecting the devnet's own container %s: %w", s.self, err)
	}
	var names []string
	if insp.NetworkSettings != nil {
		for name := range insp.NetworkSettings.Networks {
			names = append(names, name)
		}
	}
	return names, nil
}
