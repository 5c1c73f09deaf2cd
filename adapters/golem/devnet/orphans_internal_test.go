package devnet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// A process owner is gone once its process has ended, or when its pid now belongs to a later process;
// an owner in another pid namespace, or of a form it does not know, is never taken for gone.
func TestOwnerGone(t *testing.T) {
	me := ownerOf("")
	if me == "" {
		t.Skip("no /proc: owners cannot be told")
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	start, err := processStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{}
	for _, tc := range []struct {
		owner string
		gone  bool
	}{
		{me, false},
		{fmt.Sprintf("process:%s:%d:%s", ns, ended.Process.Pid, start), true},
		{fmt.Sprintf("process:%s:%d:%s1", ns, os.Getpid(), start), true}, // the pid is another process's now
		{fmt.Sprintf("process:pid:[1]:%d:%s", ended.Process.Pid, start), false},
		{"process:garbled", false},
		{"someone else", false},
	} {
		if gone, err := s.ownerGone(context.Background(), tc.owner); gone != tc.gone || err != nil {
			t.Errorf("ownerGone(%q) = %v, %v; want %v", tc.owner, gone, err, tc.gone)
		}
	}
}
