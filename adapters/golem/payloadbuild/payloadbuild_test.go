package payloadbuild

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/gcompose/gcompose/internal/testimage"
)

func write(t *testing.T, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestHashIsTheFilesOnly: the hash of a context is the same for the same files whatever their times, and
// differs when a byte, a name or the executable bit differs.
func TestHashIsTheFilesOnly(t *testing.T) {
	mk := func(app string, mode os.FileMode) string {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\nCOPY app /app\n", 0o644)
		write(t, filepath.Join(dir, "bin", "app"), app, mode)
		return dir
	}
	a, b := mk("v1", 0o755), mk("v1", 0o755)
	old := time.Now().Add(-48 * time.Hour)
	if err := os.Chtimes(filepath.Join(b, "bin", "app"), old, old); err != nil {
		t.Fatal(err)
	}
	ha, err := Hash(a)
	if err != nil {
		t.Fatal(err)
	}
	if hb, _ := Hash(b); hb != ha || len(ha) != 56 {
		t.Errorf("same files, hashes %s and %s", ha, hb)
	}
	for name, dir := range map[string]string{"content": mk("v2", 0o755), "mode": mk("v1", 0o644)} {
		if h, _ := Hash(dir); h == ha {
			t.Errorf("a changed %s kept the hash", name)
		}
	}
	ctx, err := Context(a)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(ctx)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if want := []string{"Dockerfile", "bin/", "bin/app"}; !slices.Equal(names, want) {
		t.Errorf("context entries %v, want %v", names, want)
	}
}

// TestDevnet: the devnet says what it is at /devnet/v1/info; a yagna answering 404 there is not it, and
// one answering something else is an error, not a guess.
func TestDevnet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/devnet/v1/info":
			_, _ = io.WriteString(w, `{"kind":"gcompose-devnet","engine_id":"E1"}`)
		case "/yagna/devnet/v1/info":
			http.NotFound(w, r)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	if id, err := Devnet(ctx, srv.Client(), srv.URL+"/", "k"); err != nil || id != "E1" {
		t.Errorf("devnet: %q %v", id, err)
	}
	if _, err := Devnet(ctx, srv.Client(), srv.URL+"/yagna", "k"); !errors.Is(err, ErrNotDevnet) {
		t.Errorf("a 404: %v, want ErrNotDevnet", err)
	}
	if _, err := Devnet(ctx, srv.Client(), srv.URL, "wrong"); err == nil || errors.Is(err, ErrNotDevnet) || !strings.Contains(err.Error(), "401") {
		t.Errorf("a 401: %v, want an error naming it", err)
	}
}

// TestEnsureBuildsOnce: the image of a context is built through the Engine API, labelled with the
// context's hash, and found instead of built again while the context is unchanged.
func TestEnsureBuildsOnce(t *testing.T) {
	testimage.RequireDocker(t)
	cli := testimage.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "Dockerfile"), "FROM scratch\nCOPY hello /hello\n", 0o644)
	write(t, filepath.Join(dir, "hello"), t.Name()+time.Now().String(), 0o644) // a context no one built before
	t.Cleanup(func() {
		imgs, _ := cli.ImageList(context.Background(), image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", ContextLabel+"="+dir))})
		for _, img := range imgs {
			_, _ = cli.ImageRemove(context.Background(), img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
		}
	})
	first, err := Ensure(ctx, cli, "hello", dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Hash(dir)
	if !first.Built || first.Hash != want || first.Ref != Repository+"/hello:"+want[:16] {
		t.Fatalf("first Ensure: %+v, want built %s", first, want)
	}
	insp, err := cli.ImageInspect(ctx, first.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if l := insp.Config.Labels; l[HashLabel] != want || l[PayloadLabel] != "hello" || l[ContextLabel] != dir {
		t.Errorf("labels %v", l)
	}
	if again, err := Ensure(ctx, cli, "hello", dir); err != nil || again.Built || again.Hash != want {
		t.Errorf("second Ensure: %+v %v, want found, not built", again, err)
	}
}
