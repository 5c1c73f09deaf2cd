package etcd

import "github.com/gcompose/gcompose/core/state"

// StopKeepAlive stops renewing l's lease without revoking it, as a holder
// that hangs or lost its network would: the lock expires after its TTL.
func (s *Store) StopKeepAlive(l *state.Lock) {
	s.mu.Lock()
	h := s.held[heldKey(l.App, l.Info.ID)]
	s.mu.Unlock()
	if h != nil && h.stop != nil {
		h.stop()
	}
}
