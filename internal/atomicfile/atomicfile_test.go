package atomicfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gcompose/gcompose/internal/atomicfile"
)

func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "doc.json")
	for _, content := range []string{"first", "second, longer than the first"} {
		if err := atomicfile.WriteFile(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != content {
			t.Fatalf("content %q, %v; want %q", got, err, content)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode %v, want 0600", perm)
	}
	left, _ := filepath.Glob(p + ".tmp-*")
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || len(left) != 0 {
		t.Errorf("directory holds %d entries, temps %v; want only doc.json", len(ents), left)
	}
}

func TestWriteFileMissingDirectory(t *testing.T) {
	p := filepath.Join(t.TempDir(), "no", "such", "doc.json")
	if err := atomicfile.WriteFile(p, []byte("x")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err %v, want not exist", err)
	}
}
