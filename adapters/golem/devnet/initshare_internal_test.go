package devnet

import (
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestShareInit: devnet-init goes into the relay's directory, executable by every user, named by its
// content where the payload containers see it; a directory another user could not search keeps the copy
// into each container (shareInit fails, initCmd is initPath); close removes the relay's own directory.
func TestShareInit(t *testing.T) {
	r := newRelay(slog.New(slog.DiscardHandler), "", nil, false)
	if r.err != nil {
		t.Fatal(r.err)
	}
	inner, err := r.shareInit([]byte("#!bin"))
	if err != nil {
		t.Fatalf("shareInit in the relay's own directory: %v", err)
	}
	if path.Dir(inner) != path.Dir(r.inner) || !strings.HasPrefix(path.Base(inner), "devnet-init-") {
		t.Errorf("devnet-init at %s in the containers, the socket at %s", inner, r.inner)
	}
	file := filepath.Join(filepath.Dir(r.sock), path.Base(inner))
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("the shared binary: %v, %v", st, err)
	}
	if again, err := r.shareInit([]byte("#!bin")); err != nil || again != inner {
		t.Errorf("sharing the same binary again = %s, %v; want %s", again, err, inner)
	}
	if other, err := r.shareInit([]byte("#!other")); err != nil || other == inner {
		t.Errorf("sharing another binary = %s, %v; want another name than %s", other, err, inner)
	}
	if st, err := os.Stat(filepath.Dir(r.sock)); err != nil || st.Mode().Perm()&0o001 == 0 {
		t.Errorf("the relay's directory is not searchable by every user: %v, %v", st, err)
	}
	s := &Server{initShared: inner}
	if s.initCmd() != inner {
		t.Errorf("initCmd = %s, want %s", s.initCmd(), inner)
	}
	r.close()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("after close, the shared binary: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r = newRelay(slog.New(slog.DiscardHandler), dir, nil, false)
	defer r.close()
	if inner, err := r.shareInit([]byte("#!bin")); err == nil || inner != "" {
		t.Errorf("shareInit in a directory of mode 0700 = %q, %v; want it refused", inner, err)
	}
	if (&Server{}).initCmd() != initPath {
		t.Errorf("without a shared binary initCmd = %s, want %s", (&Server{}).initCmd(), initPath)
	}
}
