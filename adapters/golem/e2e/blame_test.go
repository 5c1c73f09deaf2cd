package e2e

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/protocol"
)

// TestKilledCreateKeepsTheCheapProvider: gcompose killed (SIGKILL) while
// its create waits for the image download: the adapter ends the rental it
// made (the agreement terminated by the requestor), which is no failure of
// the provider's. The next deploy rents the cheapest provider again, at the
// plan's estimate, and the identity lists no failed provider. (It used to
// list the cheap one for ever, and every later deploy paid twice as much.)
func TestKilledCreateKeepsTheCheapProvider(t *testing.T) {
	caps := []string{"vpn", "inet"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "cheap", Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}}, // 0.54 GLM/h
		{Name: "dear", Capabilities: caps, Coeffs: []float64{0.0001, 0.0002, 0}},   // 1.08 GLM/h
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}

	// The create hangs in the image download; gcompose is killed once the
	// activity exists and has had time to be recorded.
	e.faults(ctx, map[string]any{"imageDownload": "30s"})
	cmd := e.command(ctx, nil, "deploy", "-f", desc, "--yes")
	var out strings.Builder
	var mu sync.Mutex
	cmd.Stdout = syncwriter.Writer{Mu: &mu, W: &out}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for e.summary(ctx).Activities < 1 {
		select {
		case <-ctx.Done():
			t.Fatal("no activity was created")
		case <-time.After(50 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	if err := cmd.Wait(); describeExit(err) != "killed (KILLED)" {
		mu.Lock()
		t.Fatalf("the deploy was not killed mid-create (%s):\n%s", describeExit(err), out.String())
	}
	e.faults(ctx, map[string]any{})

	// What the killed run recorded: a rental on the cheap provider, which
	// the adapter ended as gcompose went away.
	st := e.stateOf(ctx, "services.db")
	id, _ := st["identity"].(map[string]any)
	agreement, _ := id["agreement_id"].(string)
	if agreement == "" || id["activity_id"] == nil || id["init_pending"] != true {
		t.Fatalf("the killed create recorded no rental under way: %v", id)
	}
	var ended yagna.AgreementOperationEvent
	for deadline := time.Now().Add(time.Minute); ; {
		var err error
		if ended, err = e.yc.TerminateReason(ctx, agreement); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agreement %s not terminated a minute after gcompose was killed: %v", agreement, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ended.Terminator != yagna.TerminatorRequestor {
		t.Fatalf("agreement %s terminated by %s, want the requestor (the adapter's cleanup): %+v", agreement, ended.Terminator, ended)
	}

	plan := e.must(ctx, "plan", "-f", desc)
	t.Logf("the plan after the kill:\n%s", plan)
	if !strings.Contains(plan, "not blamed") || strings.Contains(plan, "avoiding provider") {
		t.Errorf("the plan does not say the provider is not blamed:\n%s", plan)
	}
	deploy := e.must(ctx, "deploy", "-f", desc, "--yes")
	if name := e.field(ctx, "services.db", "provider_name"); name != "cheap" {
		t.Errorf("after the killed create the service runs on %s, want cheap:\n%s", name, deploy)
	}
	if strings.Contains(deploy, "dearer than the plan's estimate") {
		t.Errorf("the deploy agreed dearer than planned:\n%s", deploy)
	}
	id, _ = e.stateOf(ctx, "services.db")["identity"].(map[string]any)
	if f, _ := id["failed_providers"].([]any); len(f) != 0 {
		t.Errorf("failed providers %v (%v) after a create that gcompose's own side ended", f, id["failed_reasons"])
	}

	// A config change rebuilds the healthy rental, its replacement agreed
	// while it runs (the replace action): the provider it runs on is busy
	// with it, so the plan prices the other one and the deploy rents that
	// one at that price.
	if err := os.WriteFile(desc, []byte(marketApp("      min_cpu_threads: 1\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	planned := e.plannedPerHour(ctx, desc, "services.db")
	deploy = e.must(ctx, "deploy", "-f", desc, "--yes")
	agreed, _ := agreedPrice(t, e.stateOf(ctx, "services.db"))["glm_per_hour"].(float64)
	name := e.field(ctx, "services.db", "provider_name")
	t.Logf("config change: planned %v GLM/h, agreed %v GLM/h with %s", planned, agreed, name)
	if name != "dear" || math.Abs(planned-agreed) > 1e-9 {
		t.Errorf("the rebuild for a config change planned %v GLM/h and rented %s at %v:\n%s", planned, name, agreed, deploy)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
}

// plannedPerHour is the plan's estimate for resource, in GLM an hour.
func (e *env) plannedPerHour(ctx context.Context, desc, resource string) float64 {
	e.t.Helper()
	out := e.must(ctx, "plan", "--json", "-f", desc)
	var p struct {
		Steps []struct {
			Resource string         `json:"resource"`
			Op       string         `json:"op"`
			Cost     *protocol.Cost `json:"cost"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &p); err != nil {
		e.t.Fatalf("plan --json: %v\n%s", err, out)
	}
	for _, s := range p.Steps {
		if s.Resource == resource && s.Cost != nil {
			e.t.Logf("plan: %s %s, %v GLM/h (%s)", s.Op, resource, s.Cost.PerHour, s.Cost.Note)
			return s.Cost.PerHour
		}
	}
	e.t.Fatalf("no cost of %s in the plan:\n%s", resource, out)
	return 0
}
