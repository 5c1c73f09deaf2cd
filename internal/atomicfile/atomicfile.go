// Package atomicfile writes files so that a crash at any moment leaves either
// the old content or all of the new, never a torn file: the one
// implementation shared by the state backend and the adapter init cache.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces path with data: a temp file PATH.tmp-* in the same
// directory (so the rename cannot cross file systems), fsynced, renamed over
// path, then the directory fsynced so that the rename itself survives a
// crash. The temp file is removed on failure; one left by a crash matches
// PATH.tmp-*, which callers may sweep. The file is created 0600.
func WriteFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := writeSync(f, data); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// writeSync writes data to f, fsyncs and closes it.
func writeSync(f *os.File, data []byte) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// SyncDir fsyncs a directory so that renames and removals in it are durable.
// Platforms that cannot fsync a directory (os.ErrInvalid) are not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
