package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// tenResources: r0..r9, a mix of chains and independent branches, every
// action journaled by the file adapter.
func tenResources() string {
	var b strings.Builder
	b.WriteString("meta:\n  name: APP\nplugs:\n  files:\n    path: ./out\nresources:\n")
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&b, "  r%d:\n    type: IMAGE\n    config: {path: r%d.txt, content: \"v%d\", journal: journal.log}\n", i, i, i)
		if i%3 != 0 { // r1<-r0, r2<-r1, r4<-r3, ...: three chains and r9 alone
			fmt.Fprintf(&b, "    dependencies: {prev: r%d}\n", i-1)
		}
	}
	return b.String()
}

// runCrashing runs the CLI binary with the crash point at the k-th adapter
// call; crashed is false when the run finished before reaching it.
func (e *env) runCrashing(k int, args ...string) (crashed bool, out string) {
	e.t.Helper()
	cmd := exec.Command(gcomposeBinary(e.t), append(args, "--state", e.state)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", crashEnv, k))
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ProcessState.String() == "signal: killed" {
		return true, string(b)
	}
	if err != nil {
		e.t.Fatalf("run with crash point %d: %v\n%s", k, err, b)
	}
	return false, string(b)
}

// journalCounts counts "create rN.txt" lines per file in the adapter's journal.
func (e *env) journalCounts() map[string]int {
	b, _ := os.ReadFile(e.files + "/journal.log")
	counts := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(l, "create "); ok {
			counts[name]++
		}
	}
	return counts
}

func (e *env) assertStateReadable(when string) {
	e.t.Helper()
	if r := e.gc("state", "list", "--app", e.app); r.code != 0 {
		e.t.Fatalf("%s: state unreadable: %s", when, r.stderr)
	}
}

func (e *env) assertDeployed(when string) {
	e.t.Helper()
	for i := 0; i < 10; i++ {
		if got := e.read(fmt.Sprintf("r%d.txt", i)); got != fmt.Sprintf("v%d", i) {
			e.t.Fatalf("%s: r%d.txt = %q", when, i, got)
		}
	}
}

// TestE2ECrashAtEveryPoint kills gcompose with SIGKILL after each adapter
// call of a deploy, then of a destroy, of a 10-resource app, and checks that
// the next run converges, that nothing is created twice, that the state is
// always readable, and that nothing is left behind.
func TestE2ECrashAtEveryPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("kills gcompose at every adapter call of a deploy and a destroy (minutes)")
	}
	e := newEnv(t)
	f := e.write("app.yaml", tenResources())
	points := 0
	for k := 1; ; k++ {
		before := e.journalCounts()
		crashed, out := e.runCrashing(k, "deploy", f, "--yes")
		if !crashed {
			e.assertDeployed("deploy that outran the crash point")
			break
		}
		points++
		e.assertStateReadable(fmt.Sprintf("after a crash at call %d of deploy", k))
		r := e.must("deploy", f, "--yes")
		e.assertDeployed(fmt.Sprintf("recovery from a crash at call %d", k))
		after := e.journalCounts()
		for i := 0; i < 10; i++ {
			name := fmt.Sprintf("r%d.txt", i)
			if n := after[name] - before[name]; n != 1 {
				t.Fatalf("crash at call %d: %s created %d times\ncrashed run:\n%s\nrecovery:\n%s%s", k, name, n, out, r.stdout, r.stderr)
			}
		}
		if r := e.must("deploy", f, "--yes"); !strings.Contains(r.stdout, "Nothing to do") {
			t.Fatalf("crash at call %d: not converged:\n%s", k, r.stdout)
		}
		e.must("destroy", f, "--yes")
	}
	if points < 20 {
		t.Fatalf("only %d crash points in a deploy of 10 resources: the crash hook is not reached", points)
	}
	t.Logf("deploy: crashed and recovered at %d points", points)

	points = 0
	for k := 1; ; k++ {
		crashed, _ := e.runCrashing(k, "destroy", f, "--yes")
		if !crashed {
			break
		}
		points++
		e.assertStateReadable(fmt.Sprintf("after a crash at call %d of destroy", k))
		e.must("destroy", f, "--yes")
		for i := 0; i < 10; i++ {
			if e.exists(fmt.Sprintf("r%d.txt", i)) {
				t.Fatalf("crash at call %d of destroy: r%d.txt survived the next destroy", k, i)
			}
		}
		if r := e.must("state", "list", "--app", e.app); strings.Contains(r.stdout, "resources.") {
			t.Fatalf("crash at call %d of destroy: state not empty:\n%s", k, r.stdout)
		}
		e.must("deploy", f, "--yes")
	}
	if points < 20 {
		t.Fatalf("only %d crash points in a destroy of 10 resources", points)
	}
	t.Logf("destroy: crashed and recovered at %d points", points)
	e.must("destroy", f, "--yes")
}
