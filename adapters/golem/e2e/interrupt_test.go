package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

// The devnet interrupt sweep (issue 10): the deploy of examples/webapp is cut
// short by SIGINT or SIGKILL at every adapter-call boundary and at points
// inside calls; after each, a deploy must converge without a second copy of
// anything and a destroy must leave the devnet empty and no container
// behind. `make test` runs a fixed sample (TestInterruptSample); `make
// interrupt-sweep` runs every point (TestInterruptSweep, with
// GCOMPOSE_INTERRUPT_SWEEP=1).

// Crash points of cmd/gcompose (crashpoint.go): after the K-th adapter call
// returns, the process signals itself.
const (
	crashAfterEnv  = "GCOMPOSE_TEST_CRASH_AFTER_CALLS"
	crashSignalEnv = "GCOMPOSE_TEST_CRASH_SIGNAL"
)

// interruption is one way the deploy is cut short.
type interruption struct {
	name   string
	signal syscall.Signal
	// afterCalls > 0: at the boundary after that many adapter calls.
	afterCalls int
	// inside, else: as soon as the devnet shows it (in the middle of a call).
	inside func(devnet.Summary) bool
	// faults are the devnet's fault knobs during the interrupted run.
	faults map[string]any
}

func (in interruption) String() string {
	sig := "SIGKILL"
	if in.signal == syscall.SIGINT {
		sig = "SIGINT"
	}
	if in.afterCalls > 0 {
		return fmt.Sprintf("%s after call %d", sig, in.afterCalls)
	}
	return sig + " " + in.name
}

// insidePoints are moments inside adapter calls of the webapp deploy, seen
// on the devnet.
var insidePoints = []struct {
	name   string
	when   func(devnet.Summary) bool
	faults map[string]any
}{
	{"once the allocation exists (payments create)", func(s devnet.Summary) bool { return s.Allocations >= 1 }, nil},
	{"while an agreement awaits approval (service create)", func(s devnet.Summary) bool { return s.PendingAgreements >= 1 },
		map[string]any{"approvalDelay": "2s"}},
	{"once an agreement is approved (service create)", func(s devnet.Summary) bool { return s.Agreements >= 1 }, nil},
	{"once an activity exists (deploy and init)", func(s devnet.Summary) bool { return s.Activities >= 1 }, nil},
	{"once the second agreement is approved", func(s devnet.Summary) bool { return s.Agreements >= 2 }, nil},
}

// sweepResult is what one interruption left and what the recovery saw.
type sweepResult struct {
	what     string
	exit     string
	left     devnet.Summary // right after the interrupted run
	watchers int            // market watcher containers right after it
	maxAgr   int            // most agreements approved during the re-deploy
	redeploy devnet.Summary // after the re-deploy
}

// interruptEnv is one devnet and the webapp descriptor for a run of
// interruptions.
type interruptEnv struct {
	*env
	desc string
	// files are the -f arguments of the interrupted deploy and its
	// recovery: desc alone, or desc and an override (a replace).
	files []string
}

func newInterruptEnv(t *testing.T) *interruptEnv {
	e := start(t, devnet.Config{})
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "webapp", "webapp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	desc := filepath.Join(e.dir, "webapp.yaml")
	if err := os.WriteFile(desc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return &interruptEnv{env: e, desc: desc, files: []string{"-f", desc}}
}

// interrupt runs the deploy and cuts it short; done says the deploy ended
// by itself before the interruption point (afterCalls past the last call).
func (ie *interruptEnv) interrupt(ctx context.Context, in interruption) (exit string, done bool) {
	t := ie.t
	var env []string
	if in.afterCalls > 0 {
		env = append(env, crashAfterEnv+"="+strconv.Itoa(in.afterCalls))
		if in.signal == syscall.SIGINT {
			env = append(env, crashSignalEnv+"=INT")
		}
	}
	if in.faults != nil {
		ie.faults(ctx, in.faults)
		defer ie.faults(ctx, map[string]any{})
	}
	cmd := ie.command(ctx, env, append(append([]string{"deploy"}, ie.files...), "--yes")...)
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stdout = syncwriter.Writer{Mu: &mu, W: &out}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	if in.inside != nil {
		tick := time.NewTicker(20 * time.Millisecond)
	poll:
		for {
			select {
			case err = <-exited:
				tick.Stop()
				t.Errorf("%s: the deploy ended (%s) before the point was reached", in, describeExit(err))
				return describeExit(err), true
			case <-tick.C:
				if in.inside(ie.summary(ctx)) {
					_ = cmd.Process.Signal(in.signal)
					break poll
				}
			}
		}
		tick.Stop()
	}
	// A first SIGINT lets what is under way finish (bounded by the CLI's
	// grace period); give it that long, then cut it short as a user would.
	select {
	case err = <-exited:
	case <-time.After(6 * time.Minute):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err = <-exited
	}
	mu.Lock()
	text := out.String()
	mu.Unlock()
	if in.afterCalls > 0 && err == nil {
		return "exit 0", true
	}
	exit = describeExit(err)
	// A first Ctrl-C lets what is under way finish and exits 130 saying so.
	if in.signal == syscall.SIGINT && (exit != "exit 130" || !strings.Contains(text, "Interrupted")) {
		t.Errorf("%s: %s, want exit 130 and \"Interrupted\":\n%s", in, exit, text)
	}
	return exit, false
}

func describeExit(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit 0"
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed (" + strings.ToUpper(ws.Signal().String()) + ")"
		}
		return fmt.Sprintf("exit %d", ee.ExitCode())
	default:
		return err.Error()
	}
}

// recover deploys again (watching the devnet all along) and destroys, and
// checks that nothing is duplicated or left.
func (ie *interruptEnv) recover(ctx context.Context, what, exit string) sweepResult {
	t := ie.t
	r := sweepResult{what: what, exit: exit, left: ie.summary(ctx), watchers: ie.watchers(ctx)}
	if r.watchers > 1 {
		t.Errorf("%s: %d market watchers after the interrupted run, want at most one", what, r.watchers)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if s := ie.summary(ctx); s.Agreements > r.maxAgr {
				r.maxAgr = s.Agreements
			}
		}
	}()
	out, err := ie.gcompose(ctx, append(append([]string{"deploy"}, ie.files...), "--yes")...)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("%s: the deploy after it failed: %v\n%s", what, err, out)
	}
	r.redeploy = ie.summary(ctx)
	if s := r.redeploy; s.Agreements != 2 || s.Activities != 2 || s.Allocations != 1 || s.Networks != 1 || s.Demands != 0 {
		t.Errorf("%s: after the re-deploy %+v, want 2 agreements and activities (one per service), 1 allocation, 1 network\n%s", what, s, out)
	}
	if r.maxAgr > max(2, r.left.Agreements) {
		t.Errorf("%s: %d agreements at once during the re-deploy (2 services, %d left by the interrupted run)\n%s", what, r.maxAgr, r.left.Agreements, out)
	}
	if out, err := ie.gcompose(ctx, append(append([]string{"destroy"}, ie.files...), "--yes")...); err != nil {
		t.Fatalf("%s: destroy: %v\n%s", what, err, out)
	}
	ie.checkEmpty(ctx, what)
	return r
}

// checkEmpty: the devnet holds nothing alive and no container of the app or
// of a provider is left. The market watcher, which an interrupted run may
// leave and the next run adopts, is stopped by the destroy of its last app:
// neither its container nor its demands are left.
func (ie *interruptEnv) checkEmpty(ctx context.Context, what string) {
	t := ie.t
	deadline := time.Now().Add(20 * time.Second)
	for {
		providers, err := ie.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "gcompose.devnet="+ie.instance))})
		if err != nil {
			t.Fatal(err)
		}
		app, watchers := ie.appContainers(ctx), ie.watchers(ctx)
		if len(providers) == 0 && app == 0 && watchers == 0 {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, c := range providers {
				names = append(names, fmt.Sprintf("%s (%s, activity %s)", strings.Join(c.Names, ","), c.State, c.Labels["gcompose.devnet.activity"]))
			}
			t.Errorf("%s: after destroy %d provider containers (%s), %d containers of the app and %d market watcher(s) are left", what, len(providers), strings.Join(names, "; "), app, watchers)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := ie.summary(ctx); s.Demands != 0 || s.Watched != 0 || s.Agreements != 0 || s.Activities != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Errorf("%s: after destroy the devnet holds %+v", what, s)
	}
}

func logResults(t *testing.T, rs []sweepResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-62s | %-18s | left: agr act alloc dem net watcher watched | max agr | after re-deploy: agr act alloc\n", "interruption", "interrupted run")
	for _, r := range rs {
		fmt.Fprintf(&b, "%-62s | %-18s | %9d %3d %5d %3d %3d %7d %7d | %7d | %19d %3d %5d\n", r.what, r.exit,
			r.left.Agreements, r.left.Activities, r.left.Allocations, r.left.Demands, r.left.Networks, r.watchers, r.left.Watched, r.maxAgr,
			r.redeploy.Agreements, r.redeploy.Activities, r.redeploy.Allocations)
	}
	t.Logf("interrupt sweep (%d points):\n%s", len(rs), b.String())
}

// TestInterruptSample is the fixed sample of the sweep that `make test`
// runs: SIGKILL at a call boundary early in the deploy, SIGKILL inside a
// service create once its agreement is approved, SIGINT inside a service
// create once its activity exists.
func TestInterruptSample(t *testing.T) {
	ie := newInterruptEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var rs []sweepResult
	for _, in := range []interruption{
		{signal: syscall.SIGKILL, afterCalls: 4},
		{name: insidePoints[2].name, signal: syscall.SIGKILL, inside: insidePoints[2].when, faults: insidePoints[2].faults},
		{name: insidePoints[3].name, signal: syscall.SIGINT, inside: insidePoints[3].when, faults: insidePoints[3].faults},
	} {
		exit, _ := ie.interrupt(ctx, in)
		rs = append(rs, ie.recover(ctx, in.String(), exit))
	}
	logResults(t, rs)
}

// sweepPart is the part of the sweep GCOMPOSE_INTERRUPT_SWEEP_PART asks
// for, so that it runs in pieces (each under the heavy-test lock on its
// own): SIGNAL@FROM-TO (the call boundaries FROM to TO; TO empty: until
// the deploy completes first) or SIGNAL@inside (the points of
// insidePoints), SIGNAL KILL or INT; several, comma-separated. Unset or
// empty: everything.
type sweepPart struct {
	calls    bool
	from, to int // to 0: no end
	inside   bool
}

func sweepParts(t *testing.T) map[syscall.Signal]sweepPart {
	v := os.Getenv("GCOMPOSE_INTERRUPT_SWEEP_PART")
	if v == "" {
		all := sweepPart{calls: true, from: 1, inside: true}
		return map[syscall.Signal]sweepPart{syscall.SIGKILL: all, syscall.SIGINT: all}
	}
	out := map[syscall.Signal]sweepPart{}
	for _, item := range strings.Split(v, ",") {
		name, what, ok := strings.Cut(strings.TrimSpace(item), "@")
		sig := map[string]syscall.Signal{"KILL": syscall.SIGKILL, "INT": syscall.SIGINT}[name]
		if !ok || sig == 0 {
			t.Fatalf("GCOMPOSE_INTERRUPT_SWEEP_PART=%q: want KILL@1-8, INT@9-, KILL@inside, ...", v)
		}
		p := out[sig]
		if what == "inside" {
			p.inside = true
		} else {
			from, to, _ := strings.Cut(what, "-")
			f, err := strconv.Atoi(from)
			if err != nil || f < 1 {
				t.Fatalf("GCOMPOSE_INTERRUPT_SWEEP_PART=%q: %q is not a range of calls", v, what)
			}
			p.calls, p.from, p.to = true, f, 0
			if to != "" {
				if p.to, err = strconv.Atoi(to); err != nil || p.to < f {
					t.Fatalf("GCOMPOSE_INTERRUPT_SWEEP_PART=%q: %q is not a range of calls", v, what)
				}
			}
		}
		out[sig] = p
	}
	return out
}

// TestInterruptSweep is the full sweep (make interrupt-sweep): SIGKILL and
// SIGINT after every adapter call of the deploy, until the deploy completes
// before the crash point, and at every point of insidePoints
// (GCOMPOSE_INTERRUPT_SWEEP_PART: a part of it, sweepParts).
func TestInterruptSweep(t *testing.T) {
	if os.Getenv("GCOMPOSE_INTERRUPT_SWEEP") == "" {
		t.Skip("the full interrupt sweep runs with GCOMPOSE_INTERRUPT_SWEEP=1 (make interrupt-sweep)")
	}
	parts := sweepParts(t)
	ie := newInterruptEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Hour)
	defer cancel()
	var rs []sweepResult
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		part := parts[sig]
		for k := part.from; part.calls && (part.to == 0 || k <= part.to); k++ {
			in := interruption{signal: sig, afterCalls: k}
			exit, done := ie.interrupt(ctx, in)
			if done {
				// The deploy ended before call k: every boundary is covered.
				if out, err := ie.gcompose(ctx, "destroy", "-f", ie.desc, "--yes"); err != nil {
					t.Fatalf("destroy: %v\n%s", err, out)
				}
				ie.checkEmpty(ctx, in.String())
				if k == part.from {
					// A part that starts past the last call.
					t.Logf("%s: the deploy ends before call %d", strings.Fields(in.String())[0], k)
				} else {
					t.Logf("%s: the deploy has %d adapter calls", strings.Fields(in.String())[0], k-1)
				}
				break
			}
			rs = append(rs, ie.recover(ctx, in.String(), exit))
		}
		for _, p := range insidePoints {
			if !part.inside {
				break
			}
			in := interruption{name: p.name, signal: sig, inside: p.when, faults: p.faults}
			exit, _ := ie.interrupt(ctx, in)
			rs = append(rs, ie.recover(ctx, in.String(), exit))
		}
	}
	logResults(t, rs)
}
