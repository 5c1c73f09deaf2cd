package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/protocol"
)

// marketProviders are priced so that the choice is visible (GLM per hour
// with one CPU thread busy: (duration + cpu coefficient) x 3600):
//   - cheap 0.144/h; mid 0.36/h;
//   - drift offers at 0 first, then 0.108/h dearer with every offer: it is
//     the cheapest for the first create, not after;
//   - dear is above every default cap (start 1, 0.72/env-hour, 1.08/CPU-hour);
//   - free would be cheapest but prices by a model gcompose does not know;
//   - elsewhere is free but in another subnet.
func marketProviders() []devnet.ProviderConfig {
	caps := []string{"vpn", "inet"}
	return []devnet.ProviderConfig{
		{Name: "cheap", Capabilities: caps, Coeffs: []float64{0.00002, 0.00002, 0}},
		{Name: "mid", Capabilities: caps, Coeffs: []float64{0.00005, 0.00005, 0}},
		{Name: "drift", Capabilities: caps, Coeffs: []float64{0, 0, 0}, PriceStep: []float64{0.00001, 0.00002, 0}},
		{Name: "dear", Capabilities: caps, Coeffs: []float64{0.0002, 0.0003, 1}},
		{Name: "free", Capabilities: caps, Coeffs: []float64{0, 0, 0}, Properties: map[string]any{"golem.com.pricing.model": "fixed"}},
		{Name: "elsewhere", Capabilities: caps, Coeffs: []float64{0, 0, 0}, Subnet: "elsewhere"},
	}
}

func marketApp(params string) string {
	return `
payloads:
  db:
    runtime: vm
    params:
      image_hash: "` + dbHash + `"
      offer_window: 2s
` + params + `
services:
  db:
    payload: db
`
}

// devnetOffer is a provider's latest offer as the devnet lists it.
type devnetOffer struct {
	ProviderID string         `json:"providerId"`
	Properties map[string]any `json:"properties"`
}

// offers are the providers' latest offers (the provider-side view).
func (e *env) offers(ctx context.Context) []devnetOffer {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+"/market-api/v1/offers", nil)
	req.Header.Set("Authorization", "Bearer "+appKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []devnetOffer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// hourly is what an offer of the devnet costs an hour with one thread
// busy, and its start price; ok is false for what the caps or the model
// exclude (the test's own reading of the devnet's offers).
func hourly(o devnetOffer, maxStart, maxEnv, maxCPU float64) (perHour, start float64, ok bool) {
	if o.Properties["golem.com.pricing.model"] != "linear" || o.Properties["golem.node.debug.subnet"] != "public" {
		return 0, 0, false
	}
	c := o.Properties["golem.com.pricing.model.linear.coeffs"].([]any)
	env, cpu := c[0].(float64)*3600, c[1].(float64)*3600
	start = c[2].(float64)
	return env + cpu, start, start <= maxStart && env <= maxEnv+1e-12 && cpu <= maxCPU+1e-12
}

// stateOf is gcompose state show of a resource, decoded.
func (e *env) stateOf(ctx context.Context, resource string) map[string]any {
	e.t.Helper()
	out := e.must(ctx, "state", "show", resource)
	var m map[string]any
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &m); err != nil {
		e.t.Fatalf("state show %s: %v\n%s", resource, err, out)
	}
	return m
}

// agreedPrice is the agreement.price a service's state records.
func agreedPrice(t *testing.T, st map[string]any) map[string]any {
	t.Helper()
	s, _ := st["state"].(map[string]any)
	a, _ := s["agreement"].(map[string]any)
	p, ok := a["price"].(map[string]any)
	if !ok {
		t.Fatalf("no agreement.price in state: %v", st)
	}
	return p
}

// TestMarketCheapestEveryTime: over repeated deploys the service is rented
// from the cheapest offer within the default caps every time, by what the
// devnet offered then; the provider that raises its price between offers
// wins while it is cheapest and not after; the provider above the caps, the
// one with an unknown pricing model and the one of another subnet are
// never taken; state records the agreed price. Each create counters at
// once, the plan having just seen every provider, without gathering for a
// second window; when that is dearer than the plan's estimate (drift asks
// more than it did from the plan's demand) the create says so and why.
func TestMarketCheapestEveryTime(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{Providers: marketProviders()})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("")), 0o644); err != nil {
		t.Fatal(err)
	}
	winners := map[string]int{}
	for round := 1; round <= 4; round++ {
		out := e.must(ctx, "deploy", "-f", desc, "--yes")
		name := e.field(ctx, "services.db", "provider_name")
		chosenID := e.field(ctx, "services.db", "provider_id")
		winners[name]++
		var chosen float64 = -1
		best, bestName := math.Inf(1), ""
		for _, o := range e.offers(ctx) {
			ph, _, ok := hourly(o, 0.5, 0.5, 1.0)
			if !ok {
				continue
			}
			if o.ProviderID == chosenID {
				chosen = ph
			}
			if ph < best {
				best, bestName = ph, o.Properties["golem.node.id.name"].(string)
			}
		}
		t.Logf("round %d: %s at %.4f GLM/h (cheapest within the caps: %s at %.4f)", round, name, chosen, bestName, best)
		if chosen < 0 || math.Abs(chosen-best) > 1e-9 {
			t.Fatalf("round %d: rented from %s at %v GLM/h; the cheapest within the caps was %s at %v\n%s", round, name, chosen, bestName, best, out)
		}
		price := agreedPrice(t, e.stateOf(ctx, "services.db"))
		if got := price["glm_per_hour"].(float64); math.Abs(got-chosen) > 1e-9 {
			t.Errorf("round %d: state records %v GLM/h, the offer was %v", round, got, chosen)
		}
		if !strings.Contains(out, "choosing "+name) || !strings.Contains(out, "dear") || !strings.Contains(out, `pricing model "fixed" is not understood`) {
			t.Errorf("round %d: the deploy does not explain the choice:\n%s", round, out)
		}
		if !strings.Contains(out, "(not waiting out the 2s window)") {
			t.Errorf("round %d: the create gathered offers for a second window after the plan's:\n%s", round, out)
		}
		// drift wins only when the plan saw it cheapest, at the price
		// before the one it asks the create's demand.
		dearer := strings.Contains(out, "dearer than the plan's estimate of ")
		if dearer != (name == "drift") || (dearer && !strings.Contains(out, "GLM/hour at plan time")) {
			t.Errorf("round %d: rented from %s; dearer than planned said %v, want it said (with drift's price now and at plan time) exactly when drift won:\n%s", round, name, dearer, out)
		}
		e.must(ctx, "destroy", "-f", desc, "--yes")
	}
	if winners["drift"] == 0 || winners["cheap"] == 0 {
		t.Errorf("winners %v: want drift while it was cheapest, then cheap", winners)
	}
	for _, never := range []string{"mid", "dear", "free", "elsewhere"} {
		if winners[never] > 0 {
			t.Errorf("winners %v: %s should never win", winners, never)
		}
	}
}

// TestMarketCapsAndDeny: a deny list (by name and by node id) is honoured,
// and caps below every offer fail the deploy naming the cheapest offer and
// its price, leaving nothing rented.
func TestMarketCapsAndDeny(t *testing.T) {
	golemSweep(t)
	e := start(t, devnet.Config{Providers: marketProviders()[:4]})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var driftID string
	for _, o := range e.offers(ctx) {
		if o.Properties["golem.node.id.name"] == "drift" {
			driftID = o.ProviderID
		}
	}
	desc := filepath.Join(e.dir, "app.yaml")
	deny := fmt.Sprintf("      providers_deny: [cheap, %q]\n", driftID)
	if err := os.WriteFile(desc, []byte(marketApp(deny)), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if name := e.field(ctx, "services.db", "provider_name"); name != "mid" {
		t.Fatalf("with cheap and drift denied, rented from %s, want mid", name)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")

	low := "      max_cpu_per_hour: 0.01\n      max_env_per_hour: 0.01\n      providers_deny: [drift]\n"
	if err := os.WriteFile(desc, []byte(marketApp(low)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.gcompose(ctx, "deploy", "-f", desc, "--yes")
	if err == nil {
		t.Fatalf("deploy with caps below every offer succeeded:\n%s", out)
	}
	for _, want := range []string{"no offer within the price caps", "the cheapest is cheap (", "0.144 GLM/hour", "above max_"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error does not say %q:\n%s", want, out)
		}
	}
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 || s.Demands != 0 {
		t.Errorf("after the failed deploy: %+v", s)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
}

// planCost is the cost part of plan --json.
type planCost struct {
	Steps []struct {
		Resource string         `json:"resource"`
		Cost     *protocol.Cost `json:"cost"`
	} `json:"steps"`
	Cost []plan.CostTotal `json:"cost"`
}

// TestMarketPlanEstimate: the first plan (nothing exists, the allocation
// and VPN ids are known only after apply) shows per service and in total
// what the cheapest offer within the caps costs; a redeploy's plan shows
// the agreed price; and after a fixed run the debit notes charge what the
// estimate said: the same GLM per second of the usage they bill, and within
// 10% of the estimate times the wall-clock run (the activity starts a
// moment before the deploy returns).
func TestMarketPlanEstimate(t *testing.T) {
	golemSweep(t)
	e := start(t, devnet.Config{Providers: marketProviders()[:4], DebitNoteInterval: devnet.Duration{Duration: time.Second},
		DebitNoteAcceptTimeout: devnet.Duration{Duration: 5 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	// drift denied: its price moves with every offer, plan's included.
	if err := os.WriteFile(desc, []byte(marketApp("      providers_deny: [drift]\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	readPlan := func() planCost {
		out, err := e.gcompose(ctx, "plan", "--json", "-f", desc)
		if err != nil {
			t.Fatalf("plan: %v\n%s", err, out)
		}
		var p planCost
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &p); err != nil {
			t.Fatalf("plan --json: %v\n%s", err, out)
		}
		return p
	}
	p := readPlan()
	var est *protocol.Cost
	for _, s := range p.Steps {
		if s.Resource == "services.db" {
			est = s.Cost
		}
	}
	const cheapPerHour = 0.144 // cheap's (0.00002 + 0.00002) x 3600
	if est == nil || est.Basis != protocol.CostMarket || math.Abs(est.PerHour-cheapPerHour) > 1e-9 || math.Abs(est.Total-3*cheapPerHour) > 1e-9 || est.Hours != 3 {
		t.Fatalf("first plan's estimate for services.db: %+v, want %v GLM/h from the market, %v for 3 h", est, cheapPerHour, 3*cheapPerHour)
	}
	if len(p.Cost) != 1 || p.Cost[0].Currency != "GLM" || math.Abs(p.Cost[0].PerHour-cheapPerHour) > 1e-9 {
		t.Fatalf("plan total: %+v", p.Cost)
	}
	// The hint the create gets back: the offers within the caps, best first.
	var hint struct {
		Subnet string
		Offers []struct{ Name string }
	}
	if err := json.Unmarshal(est.Hint, &hint); err != nil || hint.Subnet != "public" || len(hint.Offers) != 2 || hint.Offers[0].Name != "cheap" || hint.Offers[1].Name != "mid" {
		t.Fatalf("the estimate's hint %s (%v), want cheap then mid in subnet public", est.Hint, err)
	}
	// A saved plan: its estimate, hint included, reaches the create.
	saved := filepath.Join(e.dir, "app.plan")
	human := e.must(ctx, "plan", "-f", desc, "-out", saved)
	if !strings.Contains(human, "cost: 0.144 GLM/hour, 0.432 GLM for 3h (market: cheapest of 2 offer(s) within the caps in subnet public: cheap (") ||
		!strings.Contains(human, "Cost: 0.144 GLM/hour; at most 0.432 GLM if each runs its whole period (1 resource(s)).") {
		t.Errorf("plan does not show the estimate:\n%s", human)
	}

	// The JSON events carry the explanation of the choice: made as soon
	// as the plan's cheapest offered again, well before the window ends.
	events := e.must(ctx, "deploy", saved, "--json")
	started := time.Now()
	explained := false
	early := regexp.MustCompile(`offer\(s\) in subnet public after ([0-9.]+[mµn]?s), none of them beaten by the offers the plan saw [0-9]+s ago \(not waiting out the 2s window\); choosing cheap \(`)
	for _, line := range strings.Split(events, "\n") {
		var ev struct{ Resource, Phase, Output string }
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Resource == "services.db" && ev.Phase == "action-done" {
			explained = strings.Contains(ev.Output, "choosing cheap (") && strings.Contains(ev.Output, "mid (") &&
				strings.Contains(ev.Output, "dear (") && strings.Contains(ev.Output, "over the caps") && strings.Contains(ev.Output, "agreed with cheap (")
			m := early.FindStringSubmatch(ev.Output)
			if m == nil {
				t.Errorf("the create did not counter before its window ended, by the saved plan's hint:\n%s", ev.Output)
			} else if took, err := time.ParseDuration(m[1]); err != nil || took >= 2*time.Second {
				t.Errorf("the create chose after %s (%v), want before its 2s window ended", m[1], err)
			}
			if strings.Contains(ev.Output, "dearer than the plan") {
				t.Errorf("the create says it is dearer than planned, at the plan's price:\n%s", ev.Output)
			}
		}
	}
	if !explained {
		t.Errorf("no action-done event of services.db explains the choice:\n%s", events)
	}
	const run = 30 * time.Second
	time.Sleep(run)
	id := e.stateOf(ctx, "services.db")["state"].(map[string]any)["agreement"].(map[string]any)["id"].(string)
	notes, err := e.yc.DebitNotes(ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last *yagna.DebitNote
	for i := range notes {
		if notes[i].AgreementID == id && (last == nil || notes[i].Timestamp.After(last.Timestamp)) {
			last = &notes[i]
		}
	}
	if last == nil {
		t.Fatalf("no debit note for agreement %s", id)
	}
	due, err := strconv.ParseFloat(last.TotalAmountDue, 64)
	if err != nil {
		t.Fatal(err)
	}
	// The usage vector is an array in the order of the offer's golem.com.usage.vector, which the
	// devnet publishes as a real provider does: [golem.usage.cpu_sec, golem.usage.duration_sec].
	var billed float64
	if len(last.UsageCounterVector) == 2 {
		billed = last.UsageCounterVector[1]
	}
	wall := last.Timestamp.Sub(started).Seconds()
	perSec := est.PerHour / 3600
	t.Logf("estimate %.4f GLM/h; last debit note after %.1f s of wall clock: %s GLM for %.1f s billed (estimate x wall clock %.6f, x billed %.6f)",
		est.PerHour, wall, last.TotalAmountDue, billed, perSec*wall, perSec*billed)
	if math.Abs(due-perSec*billed) > 1e-6 {
		t.Errorf("the debit note charges %v GLM for %v s; the estimate says %v", due, billed, perSec*billed)
	}
	if wall < run.Seconds()-2 || math.Abs(due-perSec*wall) > 0.1*perSec*wall {
		t.Errorf("the debit note charges %v GLM after %.1f s; the estimate says %v (tolerance 10%%)", due, wall, perSec*wall)
	}
	// The plan of the deployed app shows the agreed price.
	p = readPlan()
	for _, s := range p.Steps {
		if s.Resource == "services.db" && (s.Cost == nil || s.Cost.Basis != protocol.CostAgreed || math.Abs(s.Cost.PerHour-cheapPerHour) > 1e-9) {
			t.Errorf("plan of the deployed app: %+v, want the agreed price", s.Cost)
		}
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
}

// TestMarketPreferSubnet: prefer_subnet is asked first and wins over a
// cheaper offer elsewhere; when it has nothing within the caps (its only
// usable provider denied, the other above the caps) the create falls back
// to subnet_tag's subnet and says so.
func TestMarketPreferSubnet(t *testing.T) {
	golemSweep(t)
	caps := []string{"vpn", "inet"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "cheap", Capabilities: caps, Coeffs: []float64{0.00002, 0.00002, 0}},
		{Name: "edge-ok", Subnet: "edge", Capabilities: caps, Coeffs: []float64{0.00005, 0.00005, 0}},
		{Name: "edge-dear", Subnet: "edge", Capabilities: caps, Coeffs: []float64{0.0002, 0.0003, 1}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("      prefer_subnet: edge\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if name := e.field(ctx, "services.db", "provider_name"); name != "edge-ok" {
		t.Fatalf("with prefer_subnet edge, rented from %s, want edge-ok", name)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if err := os.WriteFile(desc, []byte(marketApp("      prefer_subnet: edge\n      providers_deny: [edge-ok]\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.must(ctx, "deploy", "-f", desc, "--yes")
	if name := e.field(ctx, "services.db", "provider_name"); name != "cheap" {
		t.Fatalf("with nothing usable in edge, rented from %s, want cheap in public", name)
	}
	if !strings.Contains(out, "asking subnet public next") || !strings.Contains(out, "the cheapest is edge-dear (") {
		t.Errorf("the fallback is not explained:\n%s", out)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	// A preferred subnet without a single provider is given up after the
	// window, not after the negotiation timeout.
	if err := os.WriteFile(desc, []byte(marketApp("      prefer_subnet: nowhere\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	out = e.must(ctx, "deploy", "-f", desc, "--yes")
	if name := e.field(ctx, "services.db", "provider_name"); name != "cheap" || !strings.Contains(out, "no offer in subnet nowhere within 2s; asking subnet public next") {
		t.Errorf("with an empty preferred subnet, rented from %s after %s:\n%s", name, time.Since(began), out)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
}
