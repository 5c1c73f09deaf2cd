package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
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
// never taken; state records the agreed price.
func TestMarketCheapestEveryTime(t *testing.T) {
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
