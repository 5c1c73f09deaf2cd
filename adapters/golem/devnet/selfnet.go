package devnet

import (
	"context"
	"fmt"
)

// selfMounts lists the volume and bind mounts of the devnet's own container (where the VPN relay's
// socket directory may be shared with the payload containers); none when it runs on the host.
func (s *Server) selfMounts(ctx context.Context) ([]mountPoint, error) {
	if s.self == "" {
		return nil, nil
	}
	insp, err := s.docker.ContainerInspect(ctx, s.self)
	if err != nil {
		return nil, fmt.Errorf("inspecting the devnet's own container %s: %w", s.self, err)
	}
	var mps []mountPoint
	for _, m := range insp.Mounts {
		src := m.Source
		if m.Name != "" {
			src = m.Name
		}
		mps = append(mps, mountPoint{Type: m.Type, Source: src, Destination: m.Destination})
	}
	return mps, nil
}
