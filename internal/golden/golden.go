// Package golden compares a test's output with a file in testdata/, and
// rewrites that file when the tests run with -update:
//
//	go test ./core/plan -run TestRender -update
//
// Every package's goldens go through it, so -update means one thing
// everywhere. Only tests import it.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is the -update flag of every test binary that imports the package.
var update = flag.Bool("update", false, "rewrite golden files with what the tests produce")

// Updating reports whether the tests run with -update.
func Updating() bool { return *update }

// Check compares got with the file at path; under -update it writes got
// there first (making its directory). A difference is an error naming the
// file and showing both texts; the test goes on.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (go test -run '%s' -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -run '%s' -update rewrites it, after checking):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// CheckString is Check for text.
func CheckString(t testing.TB, path, got string) {
	t.Helper()
	Check(t, path, []byte(got))
}
