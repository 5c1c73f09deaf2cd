package devnet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// Devnets before the user-space VPN relay (vpnrelay.go) backed each VPN with two Docker networks: an
// internal bridge, the anchor, and a macvlan network hung off it. A machine upgraded from one may still
// hold them (a devnet killed before its cleanup); the leftovers removal (cleanupDocker, sweepOrphans)
// removes them with removeNetworks. This devnet creates no network.

// endpointsGoneWait bounds the wait for a network's endpoints to be gone after its containers left.
const endpointsGoneWait = 15 * time.Second

// removeNetworks removes Docker networks left by older devnets in the order that gives Docker 20.10's
// libnetwork the fewest concurrent endpoint changes to race on (see engine): every container still on
// them leaves first, one at a time; then the engine must show no endpoint on any of them (an endpoint's
// deletion finishes in the controller's watch loop after the call that caused it returned); only then are
// they removed, in the order given (a VPN's macvlan network before the anchor bridge it hangs off). A
// network Docker refuses to remove because it "has active endpoints" (dockerd 20.10 can keep a macvlan
// network's endpoint that no container holds for good) is an error here: removeStuckNetworks, its only
// caller, disconnects such endpoints by force, tries again, and then warns and goes on. An engine that
// does not answer ends it at once, with that error.
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
