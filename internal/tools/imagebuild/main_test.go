package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestContextFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a", "b", "c.crt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	all := []string{"a", "b", "c.crt"}
	for _, tc := range []struct {
		name, dockerfile string
		want             []string
	}{
		{"copies named", "FROM scratch\nCOPY a /a\ncopy c.crt /etc/ssl/c.crt\nENTRYPOINT [\"/a\"]\n", []string{"a", "c.crt"}},
		{"several sources", "FROM scratch\nADD a ./b /x/\n", []string{"a", "b"}},
		{"wildcard: everything", "FROM scratch\nCOPY * /\n", all},
		{"flag: everything", "FROM scratch\nCOPY --chmod=0755 a /a\n", all},
		{"a directory: everything", "FROM scratch\nCOPY sub /sub\n", all},
		{"missing: everything (the build says what)", "FROM scratch\nCOPY nope /nope\n", all},
		{"nothing copied", "FROM scratch\nENV A=1\n", nil},
	} {
		got, err := contextFiles([]byte(tc.dockerfile), dir)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
