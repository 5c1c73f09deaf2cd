package devnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The payload containers run devnet-init (payload.go) from the relay's directory, which they mount
// read-only anyway to reach its socket (vpnrelay.go): the devnet writes the binary there once, at New.
// Copying it into each container instead (CopyToContainer, the fallback) costs an archive extraction in
// a process dockerd starts per copy: 60 ms for one container, 0.5-1.2 s each when 10-30 deploy at once
// on 2 cores, which no provider pays (its VM's init is part of the runtime). The fallback remains for a
// relay that cannot serve (no directory the containers can mount: no VPNs either) and for a directory
// the image's user could not run the binary from (not searchable by others, or on a noexec filesystem).

// shareInit writes bin into the relay's directory and returns its path in the payload containers, or ""
// (with why) when they cannot run it from there.
func (r *relay) shareInit(bin []byte) (string, error) {
	if r.err != nil {
		return "", r.err
	}
	dir := filepath.Dir(r.sock)
	if r.ownDir != "" {
		// Made 0700 by MkdirTemp: the image's user (PID 1 runs as it) must reach the binary. The
		// socket in it takes a link only with the token the node's start was given.
		if err := os.Chmod(dir, 0o755); err != nil {
			return "", err
		}
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return "", err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return "", fmt.Errorf("%s is not searchable by every user (mode %s)", d, st.Mode().Perm())
		}
		if d == r.root || d == filepath.Dir(d) {
			break
		}
	}
	if noexec(dir) {
		return "", fmt.Errorf("%s is on a noexec filesystem", dir)
	}
	// Named by its content: devnets that share the directory (one -vpn-dir) share the file, and one
	// that was killed leaves no new file behind for each start. It stays after Close, which would
	// otherwise take it from another devnet still running on it; a directory the relay made goes whole.
	sum := sha256.Sum256(bin)
	name := "devnet-init-" + hex.EncodeToString(sum[:8])
	tmp := filepath.Join(dir, "."+name+"-"+newID()[:8])
	if err := os.WriteFile(tmp, bin, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // whatever the umask
		_ = os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return path.Join(path.Dir(r.inner), name), nil
}

// initCmd is the path of devnet-init in a payload container: in the relay's directory, or initPath where
// the devnet copies it.
func (s *Server) initCmd() string {
	if s.initShared != "" {
		return s.initShared
	}
	return initPath
}

// sharedInitNote says, for the log, where the payload containers run devnet-init from.
func sharedInitNote(inner string, err error) string {
	if inner != "" {
		return "run from the relay's directory at " + inner
	}
	return "copied into each payload container (" + strings.TrimSpace(fmt.Sprint(err)) + ")"
}
