package enginebench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestServedAdapterKilledDuringDeploy kills the served file adapter (SIGKILL
// through the Engine API) while a deploy has actions in flight. The server
// is restarted once: the deploy either completes through the restart or
// fails naming the resources whose calls were in flight, with the reason;
// the state records every resource either done (Active) or with its
// operation pending, so the next deploy converges, and no file is created
// twice (the adapter's journal lists one create per path at most).
func TestServedAdapterKilledDuringDeploy(t *testing.T) {
	const n, par = 30, 10
	h := newHarness(t, 5*time.Minute)
	want := files("kill", n, 400, "content")
	for _, r := range want {
		r.Config["journal"] = "journal.log"
	}
	cli := testimage.Client(t)

	type result struct {
		out *engine.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, _, err := h.run("kill", want, false, par, nil)
		done <- result{out, err}
	}()
	// Kill once the first actions are done and the next ones in flight.
	journal := filepath.Join(h.files, "journal.log")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, _ := os.ReadFile(journal); len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no action finished in 2 minutes")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	list, err := cli.ContainerList(h.ctx, container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", testimage.Label+"="+t.Name()), filters.Arg("label", runner.LabelCall+"=serve"))})
	if err != nil || len(list) != 1 {
		t.Fatalf("served containers: %d, %v; want 1", len(list), err)
	}
	if err := cli.ContainerKill(h.ctx, list[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	failedNames := map[string]bool{}
	if res.err != nil {
		t.Logf("deploy with the server killed: %v", res.err)
		var failed *apply.FailedError
		if !errors.As(res.err, &failed) || len(failed.Outcomes) == 0 {
			t.Fatalf("err = %v, want a failure naming the resources", res.err)
		}
		if len(failed.Outcomes) > par {
			t.Errorf("%d resources failed; only the calls in flight (at most %d) may", len(failed.Outcomes), par)
		}
		for _, o := range failed.Outcomes {
			failedNames[o.Resource] = true
			if !strings.HasPrefix(o.Resource, "files.f") || !strings.Contains(o.Err.Error(), "adapter server ended") {
				t.Errorf("%s: %v; want the resource named with the server's end as the reason", o.Resource, o.Err)
			}
		}
	} else {
		t.Log("the deploy completed through the restarted server")
	}
	doc, err := h.store.Load(h.ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		r := doc.Resources[name]
		switch {
		case !failedNames[name] && (r == nil || r.Status != state.StatusActive):
			t.Errorf("%s did not fail but is not Active in the state: %+v", name, r)
		case r != nil && r.Status != state.StatusActive && r.Pending == nil:
			t.Errorf("%s: status %s with nothing pending", name, r.Status)
		}
	}

	// The next deploy converges; the one after has nothing to do.
	out, _, err := h.run("kill", want, false, par, nil)
	if err != nil {
		t.Fatalf("deploy after the kill: %v", err)
	}
	t.Logf("deploy after the kill: %+v", out.Plan.Summary)
	checkFiles(t, h.files, want)
	if out, _, err := h.run("kill", want, false, par, nil); err != nil || out.Plan.HasChanges() {
		t.Fatalf("third deploy: %v %+v", err, out.Plan.Summary)
	}
	raw, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	creates := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		creates[line]++
	}
	for line, c := range creates {
		if c > 1 || !strings.HasPrefix(line, "create kill/") {
			t.Errorf("journal: %q %d times; want each file created once", line, c)
		}
	}
	if left := testimage.ContainersLabelled(t, h.ctx, testimage.Label, t.Name()); len(left) > 0 {
		// Served containers are removed when they end; give removal a moment.
		time.Sleep(2 * time.Second)
		if left = testimage.ContainersLabelled(t, h.ctx, testimage.Label, t.Name()); len(left) > 0 {
			t.Errorf("containers left: %v", left)
		}
	}
}
