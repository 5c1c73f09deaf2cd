package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EDeployWhoseOutputPipeCloses: the reader of gcompose's output goes
// away mid-action, as `tee` does when Ctrl-C stops `gcompose deploy | tee
// log`, or `| head` when it has read enough. gcompose must not die of
// SIGPIPE with the action's operation left pending (a Golem service down
// until the next deploy): it stops as at a first interrupt, the action
// under way finishes and is recorded, and it exits 130. With a SIGINT as
// well (Ctrl-C reaches both), it is still one interrupt, not an abort.
func TestE2EDeployWhoseOutputPipeCloses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sigint bool
	}{
		{"ctrl-c of deploy | tee", true},
		{"deploy | head", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := e.write("app.yaml", strings.ReplaceAll(chain(3), "delay_ms: 300", "delay_ms: 2000"))
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(gcomposeBinary(t), "deploy", f, "--yes", "--json", "--state", e.state)
			cmd.Stdout, cmd.Stderr = w, w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			sc := bufio.NewScanner(r)
			var seen []string
			for sc.Scan() {
				seen = append(seen, sc.Text())
				if strings.Contains(sc.Text(), `"phase":"action"`) && strings.Contains(sc.Text(), `"resource":"resources.r0"`) {
					break
				}
			}
			r.Close() // the reader is gone, with r0's create under way
			if tc.sigint {
				cmd.Process.Signal(syscall.SIGINT)
			}
			start := time.Now()
			err = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				t.Fatalf("gcompose died of %s (%v) after its output pipe closed; it had written:\n%s", ws.Signal(), err, strings.Join(seen, "\n"))
			}
			if code := exitCode(t, err); code != exitInterrupted {
				t.Fatalf("exit %d, want %d", code, exitInterrupted)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Fatalf("took %s to stop", took)
			}
			if got := e.read("r0.txt"); got != "0" {
				t.Fatalf("r0's create under way did not finish: r0.txt = %q", got)
			}
			if res := e.must("state", "show", "resources.r0", "--app", e.app); strings.Contains(res.stdout, "pending") {
				t.Fatalf("r0's finished create left pending:\n%s", res.stdout)
			}
			if tc.sigint && e.exists("r2.txt") {
				t.Fatalf("r2 was created after the interrupt")
			}
			e.must("deploy", f, "--yes")
			for i := range 3 {
				if n := strings.Count(e.read(".file-adapter.log"), fmt.Sprintf("create r%d.txt\n", i)); n != 1 {
					t.Fatalf("r%d.txt created %d times:\n%s", i, n, e.read(".file-adapter.log"))
				}
			}
			e.must("destroy", f, "--yes")
		})
	}
}
