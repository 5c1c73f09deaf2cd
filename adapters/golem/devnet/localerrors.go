package devnet

import "net/http"

// daoErrorLocked answers yagna's own database failure when the daoErrors knob says so (one per call),
// as core/activity/src/error.rs answers Error::Dao: a 500 "DAO error: …". The caller holds s.mu.
func (s *Server) daoErrorLocked(w http.ResponseWriter) bool {
	if s.faults.DaoErrors <= 0 {
		return false
	}
	s.faults.DaoErrors--
	w.Header().Set(BeyondSpecHeader, "yagna's own database error (devnet fault knob daoErrors)")
	writeError(w, http.StatusInternalServerError, "DAO error: Database connection error: timed out waiting for connection")
	return true
}
