package enginebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// killOnReturn kills the served adapter container the moment the trigger
// resource's action returns, before the engine sees that answer, and records
// which actions had returned and which were still under way then.
type killOnReturn struct {
	plan.Adapters
	trigger string
	kill    func() error

	mu       sync.Mutex
	started  map[string]bool
	returned map[string]bool
	// At the kill: what had returned, what was under way (started, not
	// returned), and the kill's error.
	doneAtKill, inFlightAtKill []string
	killErr                    error
	killed                     bool
}

func (k *killOnReturn) Action(ctx context.Context, c plan.Call, a protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	k.mu.Lock()
	k.started[c.Name] = true
	k.mu.Unlock()
	out, err := k.Adapters.Action(ctx, c, a, stale)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.returned[c.Name] = true
	if c.Name == k.trigger && !k.killed {
		k.killed = true
		for n := range k.started {
			if k.returned[n] {
				k.doneAtKill = append(k.doneAtKill, n)
			} else {
				k.inFlightAtKill = append(k.inFlightAtKill, n)
			}
		}
		slices.Sort(k.doneAtKill)
		slices.Sort(k.inFlightAtKill)
		k.killErr = k.kill()
	}
	return out, err
}

// TestServedAdapterKilledDuringDeploy kills the served file adapter (SIGKILL
// through the Engine API) in the middle of a deploy: when the first action
// (a short one) returns, while the others of its wave are asleep in the
// server and the rest not started. The kill is shown to land there: exactly
// the actions under way at the kill fail, naming the server's end, with
// their operations pending in the state; what had returned and what starts
// after the kill (on the server restarted once) is Active. The next deploy
// converges and no file is created twice (the adapter's journal lists one
// create per path).
func TestServedAdapterKilledDuringDeploy(t *testing.T) {
	const n, par = 20, 10
	// The trigger's action takes 100 ms, every other 3 s: when the trigger
	// returns, the others of its wave cannot have, even on a loaded machine.
	const trigger = "files.f0000"
	h := newHarness(t, 5*time.Minute)
	want := h.fileResources("kill", n, 3000, "content")
	for _, r := range want {
		r.Config["journal"] = "journal.log"
	}
	want[trigger].Config["delay_ms"] = 100
	cli := testimage.Client(t)

	kill := func() error {
		list, err := cli.ContainerList(h.ctx, container.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", testimage.Label+"="+t.Name()), filters.Arg("label", runner.LabelCall+"=serve"))})
		if err != nil {
			return err
		}
		if len(list) != 1 {
			return fmt.Errorf("%d served containers running, want 1", len(list))
		}
		return cli.ContainerKill(h.ctx, list[0].ID, "KILL")
	}
	k := &killOnReturn{trigger: trigger, kill: kill, started: map[string]bool{}, returned: map[string]bool{}}
	h.count.take()
	_, _, err := h.run("kill", want, false, par, func(ad plan.Adapters) plan.Adapters { k.Adapters = ad; return k })
	if !k.killed || k.killErr != nil {
		t.Fatalf("the server was not killed (trigger returned: %v): %v; deploy: %v", k.killed, k.killErr, err)
	}
	t.Logf("at the kill: returned %v; under way %v; not started %d", k.doneAtKill, k.inFlightAtKill, n-len(k.doneAtKill)-len(k.inFlightAtKill))
	if !slices.Equal(k.doneAtKill, []string{trigger}) || len(k.inFlightAtKill) == 0 || len(k.doneAtKill)+len(k.inFlightAtKill) == n {
		t.Fatalf("the kill did not land mid-deploy: returned %v, under way %v of %d", k.doneAtKill, k.inFlightAtKill, n)
	}
	if serves := h.count.take()["serve"]; serves != 2 {
		t.Errorf("%d served containers started, want 2 (the first and its one restart)", serves)
	}

	var failed *apply.FailedError
	if !errors.As(err, &failed) {
		t.Fatalf("deploy: %v; want the resources under way at the kill to fail", err)
	}
	failedNames := map[string]bool{}
	for _, o := range failed.Outcomes {
		failedNames[o.Resource] = true
		if !strings.Contains(o.Err.Error(), "adapter server ended") {
			t.Errorf("%s: %v; want the server's end as the reason", o.Resource, o.Err)
		}
	}
	for _, name := range k.inFlightAtKill {
		if !failedNames[name] {
			t.Errorf("%s was under way at the kill but did not fail", name)
		}
	}
	doc, err := h.store.Load(h.ctx, "kill")
	if err != nil {
		t.Fatal(err)
	}
	afterKill := 0
	for name := range want {
		r := doc.Resources[name]
		switch {
		case failedNames[name]:
			if r == nil || r.Status == state.StatusActive || r.Pending == nil {
				t.Errorf("%s failed but the state does not record its operation pending: %+v", name, r)
			}
		case r == nil || r.Status != state.StatusActive:
			t.Errorf("%s did not fail but is not Active in the state: %+v", name, r)
		case !slices.Contains(k.doneAtKill, name):
			afterKill++
		}
	}
	// The calls that start just after the kill may still reach the dying
	// server; the later ones go to the restarted one.
	if afterKill == 0 {
		t.Errorf("no resource started after the kill became Active: the restarted server did nothing")
	}
	journal := filepath.Join(h.files, "journal.log")
	raw, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range k.inFlightAtKill {
		if p := want[name].Config["path"].(string); strings.Contains(string(raw), "create "+p+"\n") {
			t.Errorf("%s was killed asleep, yet its file was created", name)
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
	if raw, err = os.ReadFile(journal); err != nil {
		t.Fatal(err)
	}
	creates := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		creates[line]++
	}
	if len(creates) != n {
		t.Errorf("journal: %d files created, want %d", len(creates), n)
	}
	for line, c := range creates {
		if c > 1 || !strings.HasPrefix(line, "create kill/") {
			t.Errorf("journal: %q %d times; want each file created once", line, c)
		}
	}
	// Served containers are removed when they end: give removal time.
	left := testimage.ContainersLabelled(t, h.ctx, testimage.Label, t.Name())
	for deadline := time.Now().Add(30 * time.Second); len(left) > 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		left = testimage.ContainersLabelled(t, h.ctx, testimage.Label, t.Name())
	}
	if len(left) > 0 {
		t.Errorf("containers left 30 s after the last deploy: %v", left)
	}
}
