package service

import (
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

func offer(id, name string, coeffs []any, extra map[string]any) *yagna.Proposal {
	props := map[string]any{
		PropPricingModel: "linear", PropScheme: "payu", PropNodeName: name, PropSubnet: "public",
		PropUsageVector: []any{counterDuration, counterCPU}, PropLinearCoeffs: coeffs,
		"golem.inf.cpu.threads": 4.0, "golem.inf.mem.gib": 8.0,
	}
	for k, v := range extra {
		props[k] = v
	}
	return &yagna.Proposal{ProposalID: "p-" + id, IssuerID: id, Properties: props, State: yagna.ProposalInitial}
}

func TestPriceOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]any
		want  Price
		err   string
	}{
		{"linear, yagna's order", offer("a", "a", []any{0.0001, 0.0002, 0.5}, map[string]any{PropUsageVector: []any{counterCPU, counterDuration}}).Properties,
			Price{Start: 0.5, CPUHour: 0.36, EnvHour: 0.72}, ""},
		{"devnet's order", offer("a", "a", []any{0.0001, 0.0002, 0.0}, nil).Properties, Price{EnvHour: 0.36, CPUHour: 0.72}, ""},
		{"unknown model", offer("a", "a", []any{0.0, 0.0, 0.0}, map[string]any{PropPricingModel: "burn-rate"}).Properties, Price{}, `pricing model "burn-rate" is not understood`},
		{"no model", map[string]any{}, Price{}, `pricing model "" is not understood`},
		{"other scheme", offer("a", "a", []any{0.0, 0.0, 0.0}, map[string]any{PropScheme: "payd"}).Properties, Price{}, `scheme "payd"`},
		{"unknown counter with a price", offer("a", "a", []any{0.1, 0.0, 0.0, 0.0}, map[string]any{PropUsageVector: []any{"golem.usage.gib", counterDuration, counterCPU}}).Properties, Price{}, `"golem.usage.gib" has a price`},
		{"unknown counter, free", offer("a", "a", []any{0.0, 0.0001, 0.0, 0.0}, map[string]any{PropUsageVector: []any{"golem.usage.gib", counterDuration, counterCPU}}).Properties, Price{EnvHour: 0.36}, ""},
		{"short coeffs", offer("a", "a", []any{0.1, 0.0}, nil).Properties, Price{}, "does not match"},
		{"negative", offer("a", "a", []any{-0.1, 0.0, 0.0}, nil).Properties, Price{}, "negative"},
		{"not numbers", offer("a", "a", []any{"x", 0.0, 0.0}, nil).Properties, Price{}, "not a list of numbers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PriceOf(tc.props)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			const eps = 1e-12
			if d := got.Start - tc.want.Start + got.EnvHour - tc.want.EnvHour + got.CPUHour - tc.want.CPUHour; d > eps || d < -eps {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMarketParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]any
		check  func(Market) bool
		err    string
	}{
		{"defaults", nil, func(m Market) bool {
			return m.MaxStart == DefaultMaxStartPrice && m.MaxCPUHour == DefaultMaxCPUPerHour && m.MaxEnvHour == DefaultMaxEnvPerHour && m.Window == DefaultOfferWindow && m.CPULoad == 1
		}, ""},
		{"numbers and strings", map[string]any{"max_start_price": "0.1", "max_cpu_per_hour": 2.0, "max_env_per_hour": 0.0, "offer_window": "2s", "expected_cpu_load": 0.25},
			func(m Market) bool {
				return m.MaxStart == 0.1 && m.MaxCPUHour == 2 && m.MaxEnvHour == 0 && m.Window == 2*time.Second && m.CPULoad == 0.25
			}, ""},
		{"lists", map[string]any{"providers_allow": []any{"a", "0x1"}, "providers_deny": "b", "prefer_subnet": "fast"},
			func(m Market) bool {
				return len(m.Allow) == 2 && len(m.Deny) == 1 && m.Deny[0] == "b" && m.PreferSubnet == "fast"
			}, ""},
		{"negative cap", map[string]any{"max_start_price": -1.0}, nil, "params.max_start_price -1: want a number of GLM"},
		{"word cap", map[string]any{"max_cpu_per_hour": "cheap"}, nil, `params.max_cpu_per_hour "cheap": want a number`},
		{"bad window", map[string]any{"offer_window": "soon"}, nil, `params.offer_window "soon"`},
		{"window number", map[string]any{"offer_window": 5.0}, nil, "params.offer_window: want a duration"},
		{"bad list", map[string]any{"providers_deny": []any{"a", 3.0}}, nil, "params.providers_deny[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Payload: Payload{Name: "db", Runtime: "vm", Params: tc.params}}
			m, err := c.Market()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "payload db") {
					t.Fatalf("err %v, want %q naming the payload", err, tc.err)
				}
				return
			}
			if err != nil || !tc.check(m) {
				t.Fatalf("%+v, %v", m, err)
			}
		})
	}
}

// TestChoice: the cheapest offer within the caps for the agreement's
// expiration wins; lists and caps exclude; ties go to more threads.
func TestChoice(t *testing.T) {
	const h = 3 * time.Hour
	m := Market{MaxStart: 0.5, MaxCPUHour: 1, MaxEnvHour: 0.5, CPULoad: 1, Deny: []string{"denied"}}
	offers := []*yagna.Proposal{
		offer("0xa", "cheap-start-dear-hour", []any{0.0001, 0.0001, 0.0}, nil),   // 0.72/h: 2.16 for 3 h
		offer("0xb", "dear-start-cheap-hour", []any{0.00005, 0.00005, 0.4}, nil), // 0.36/h + 0.4: 1.48
		offer("0xc", "over-cpu", []any{0.00001, 0.0003, 0.0}, nil),               // 1.08/CPU-hour
		offer("0xd", "denied", []any{0.0, 0.0, 0.0}, nil),
		offer("0xe", "fixed", []any{0.0, 0.0, 0.0}, map[string]any{PropPricingModel: "fixed"}),
		offer("0xf", "same-as-b-fewer-threads", []any{0.00005, 0.00005, 0.4}, map[string]any{"golem.inf.cpu.threads": 2.0}),
	}
	var judged []Offer
	for _, p := range offers {
		judged = append(judged, m.Judge(p, h))
	}
	ranked := Rank(judged)
	var names []string
	for _, o := range ranked {
		names = append(names, o.Name)
	}
	if got := strings.Join(names, ","); got != "dear-start-cheap-hour,same-as-b-fewer-threads,cheap-start-dear-hour" {
		t.Fatalf("ranked %s", got)
	}
	if j := judged[2]; j.Over == "" || !strings.Contains(j.Over, "max_cpu_per_hour") {
		t.Errorf("over-cpu: %+v", j)
	}
	if j := judged[3]; !strings.Contains(j.Skip, "deny list") {
		t.Errorf("denied: %+v", j)
	}
	if j := judged[4]; !strings.Contains(j.Skip, `pricing model "fixed"`) {
		t.Errorf("fixed: %+v", j)
	}
	ex := Explain(judged, m, h)
	if !strings.Contains(ex, "dear-start-cheap-hour (0xb) subnet public: start 0.4 GLM, 0.18 GLM/env-hour, 0.18 GLM/CPU-hour -> 0.36 GLM/hour, 1.48 GLM for 3h0m0s") {
		t.Errorf("explain:%s", ex)
	}
	// With a short expiration the start price matters more.
	short := Rank([]Offer{m.Judge(offers[0], time.Minute), m.Judge(offers[1], time.Minute)})
	if short[0].Name != "cheap-start-dear-hour" {
		t.Errorf("for a minute %s wins", short[0].Name)
	}
	allow := m
	allow.Allow = []string{"0xa"}
	if r := Rank([]Offer{allow.Judge(offers[0], h), allow.Judge(offers[1], h)}); len(r) != 1 || r[0].Provider != "0xa" {
		t.Errorf("allow list: %+v", r)
	}
}

func TestNoOfferError(t *testing.T) {
	m := Market{MaxStart: 0, MaxCPUHour: 0.01, MaxEnvHour: 0.01, CPULoad: 1}
	var judged []Offer
	for _, p := range []*yagna.Proposal{
		offer("0xa", "a", []any{0.0001, 0.0001, 0.0}, nil),
		offer("0xb", "b", []any{0.00005, 0.00005, 0.0}, nil),
		offer("0xc", "c", []any{0.0, 0.0, 0.0}, map[string]any{PropPricingModel: "fixed"}),
	} {
		judged = append(judged, m.Judge(p, time.Hour))
	}
	err := NoOfferError(judged, m, time.Hour)
	want := "no offer within the price caps (max_start_price 0 GLM, max_cpu_per_hour 0.01 GLM, max_env_per_hour 0.01 GLM) among 3 offers; the cheapest is b (0xb) at start 0 GLM, 0.18 GLM/env-hour, 0.18 GLM/CPU-hour, 0.36 GLM/hour, 0.36 GLM for 1h0m0s: 0.18 GLM per CPU-hour is above max_cpu_per_hour 0.01 GLM"
	if err.Error() != want {
		t.Fatalf("got  %s\nwant %s", err, want)
	}
	err = NoOfferError(judged[2:], m, time.Hour)
	if !strings.Contains(err.Error(), `c (0xc): pricing model "fixed" is not understood`) {
		t.Fatal(err)
	}
}

func TestSubnets(t *testing.T) {
	for _, tc := range []struct {
		params map[string]any
		want   string
	}{
		{nil, "public"},
		{map[string]any{"subnet_tag": "devnet"}, "devnet"},
		{map[string]any{"prefer_subnet": "edge"}, "edge,public"},
		{map[string]any{"prefer_subnet": "edge", "subnet_tag": "edge"}, "edge"},
		{map[string]any{"prefer_subnet": "edge", "subnet_tag": "devnet"}, "edge,devnet"},
	} {
		c := Config{Payload: Payload{Runtime: "vm", Params: tc.params}}
		if got := strings.Join(c.Subnets(), ","); got != tc.want {
			t.Errorf("%v: subnets %s, want %s", tc.params, got, tc.want)
		}
	}
}
