package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Check reports instead of failing.
type recorder struct {
	*testing.T
	errors, fatals []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.fatals = append(r.fatals, fmt.Sprint(args...))
	runtime.Goexit()
}

// check runs Check on a recorder (in a goroutine of its own, since Fatal
// ends it).
func check(t *testing.T, path, got string) *recorder {
	r := &recorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		CheckString(r, path, got)
	}()
	<-done
	return r
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.golden")
	if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := check(t, path, "hello\n"); len(r.errors)+len(r.fatals) > 0 {
		t.Errorf("same text: %v %v", r.errors, r.fatals)
	}
	r := check(t, path, "hello")
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], path) || !strings.Contains(r.errors[0], "-update") {
		t.Errorf("a difference: errors %q, want one naming %s and -update", r.errors, path)
	}
	r = check(t, filepath.Join(dir, "missing.golden"), "x")
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "missing.golden") {
		t.Errorf("a missing file: fatals %q", r.fatals)
	}
}

func TestUpdateWrites(t *testing.T) {
	if err := flag.Set("update", "true"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("update", "false")
	if !Updating() {
		t.Fatal("Updating() is false under -update")
	}
	path := filepath.Join(t.TempDir(), "sub", "b.golden")
	if r := check(t, path, "new\n"); len(r.errors)+len(r.fatals) > 0 {
		t.Errorf("under -update: %v %v", r.errors, r.fatals)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "new\n" {
		t.Errorf("under -update the file holds %q, %v; want it written", b, err)
	}
}
