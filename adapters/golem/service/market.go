package service

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// The market strategy: which offer a service is rented from. Offers are
// gathered for a short window, priced under the usage the service is
// expected to have until its agreement expires, and the cheapest one within
// the caps is countered (docs/golem.md, "Choosing a provider").
//
// Both reference requestors choose by price too, but differently: yapapi's
// default LeastExpensiveLinearPayuMS (yapapi/strategy/least_expensive.py,
// defaults in yapapi/golem.py _initialize_default_strategy) scores every
// offer as it comes for 60 s of usage and signs with the best scored of
// those collected so far; golem-js filters by price limits
// (src/market/strategy.ts limitPriceFilter, src/market/market.module.ts
// filterProposalsByPricingOptions) and its ProposalsBatch picks the lowest
// getEstimatedCost for one hour (src/market/proposal/proposals_batch.ts).
// gcompose prices for the agreement's whole expiration, since a service
// runs until it expires, and says which offer was cheapest when none fits.

// Offer property names of the linear pricing model
// (yagna agent/provider/src/market/presets.rs, golem_cli/src/setup.rs).
const (
	PropPricingModel = "golem.com.pricing.model"
	PropLinearCoeffs = "golem.com.pricing.model.linear.coeffs"
	PropUsageVector  = "golem.com.usage.vector"
	PropScheme       = "golem.com.scheme"
	PropNodeName     = "golem.node.id.name"
	PropSubnet       = "golem.node.debug.subnet"
	counterDuration  = "golem.usage.duration_sec"
	counterCPU       = "golem.usage.cpu_sec"
)

// Default caps, used for what the payload's params leave out. They are
// golem-js's own example limits (src/golem-network/golem-network.test.ts,
// src/market/market.module.test.ts: maxStartPrice 0.5, maxCpuPerHourPrice 1,
// maxEnvPerHourPrice 0.5) and 40x / 100x the price golemsp offers by
// default (golem_cli/src/setup.rs: 0.025 GLM per CPU-hour, a fifth of it
// per env-hour, no start fee): every ordinarily priced provider passes,
// while a mispriced one cannot take more than 5 GLM from a 3 h service
// (0.5 + 3 x 1.5), the default budget of an app (adapters/golem/lowering
// DefaultBudget). yapapi's defaults (1 GLM start, 0.2 GLM per CPU-second,
// 0.1 GLM per second) are caps per second, i.e. 720 and 360 GLM an hour:
// practically none.
const (
	DefaultMaxStartPrice = 0.5
	DefaultMaxCPUPerHour = 1.0
	DefaultMaxEnvPerHour = 0.5
	// DefaultOfferWindow is how long offers are gathered before the best is
	// chosen: the devnet answers at once, providers on the real network
	// within a few seconds of the demand (golem-js's ProposalsBatch waits
	// up to 1 s for a batch of one provider's offers; yapapi keeps
	// collecting while it negotiates).
	DefaultOfferWindow = 5 * time.Second
	// DefaultCPULoad is the CPU threads a service is expected to keep busy:
	// one, all the time (as yapapi prices every counter for the whole
	// expected time). A mostly idle service pays less than estimated.
	DefaultCPULoad = 1.0
)

// Market is what the payload's params say about choosing a provider.
type Market struct {
	MaxStart, MaxCPUHour, MaxEnvHour float64
	// Allow, when not empty, are the only providers taken (node ids or
	// names); Deny are never taken.
	Allow, Deny []string
	// PreferSubnet, when set, is asked first; the payload's subnet
	// (subnet_tag, default public) only when no offer there is within the
	// caps. One demand reaches one subnet: a provider's offer demands its
	// own subnet (golem.node.debug.subnet in its constraints).
	PreferSubnet string
	Window       time.Duration
	CPULoad      float64
}

// Subnets are the subnets to ask, in order of preference.
func (c Config) Subnets() []string {
	m, err := c.Market()
	if err != nil || m.PreferSubnet == "" || m.PreferSubnet == c.Subnet() {
		return []string{c.Subnet()}
	}
	return []string{m.PreferSubnet, c.Subnet()}
}

// Market reads the market params of the payload, with the defaults.
func (c Config) Market() (Market, error) {
	m := Market{MaxStart: DefaultMaxStartPrice, MaxCPUHour: DefaultMaxCPUPerHour, MaxEnvHour: DefaultMaxEnvPerHour,
		Window: DefaultOfferWindow, CPULoad: DefaultCPULoad}
	for _, f := range []struct {
		param string
		to    *float64
	}{{"max_start_price", &m.MaxStart}, {"max_cpu_per_hour", &m.MaxCPUHour}, {"max_env_per_hour", &m.MaxEnvHour}, {"expected_cpu_load", &m.CPULoad}} {
		v, ok, err := c.number(f.param)
		if err != nil {
			return m, err
		}
		if ok {
			*f.to = v
		}
	}
	var err error
	if m.Allow, err = c.strings("providers_allow"); err != nil {
		return m, err
	}
	if m.Deny, err = c.strings("providers_deny"); err != nil {
		return m, err
	}
	switch v := c.Payload.Params["prefer_subnet"].(type) {
	case nil:
	case string:
		m.PreferSubnet = v
	default:
		return m, fmt.Errorf("payload %s: params.prefer_subnet: want a subnet name, got %v", c.Payload.Name, v)
	}
	if s := c.param("offer_window"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return m, fmt.Errorf("payload %s: params.offer_window %q: want a duration such as 10s", c.Payload.Name, s)
		}
		m.Window = d
	} else if _, ok := c.Payload.Params["offer_window"]; ok {
		return m, fmt.Errorf("payload %s: params.offer_window: want a duration such as \"10s\"", c.Payload.Name)
	}
	return m, nil
}

// number reads a non-negative number param (a number or a decimal string).
func (c Config) number(k string) (float64, bool, error) {
	var v float64
	switch x := c.Payload.Params[k].(type) {
	case nil:
		return 0, false, nil
	case float64:
		v = x
	case int:
		v = float64(x)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return 0, false, fmt.Errorf("payload %s: params.%s %q: want a number", c.Payload.Name, k, x)
		}
		v = f
	default:
		return 0, false, fmt.Errorf("payload %s: params.%s: want a number, got %v", c.Payload.Name, k, x)
	}
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("payload %s: params.%s %v: want a number of GLM, zero or more", c.Payload.Name, k, v)
	}
	return v, true, nil
}

func (c Config) strings(k string) ([]string, error) {
	switch x := c.Payload.Params[k].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{x}, nil
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("payload %s: params.%s[%d]: want a provider node id or name, got %v", c.Payload.Name, k, i, e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("payload %s: params.%s: want a list of provider node ids or names, got %v", c.Payload.Name, k, x)
	}
}

// Price is an offer's linear price, in GLM: the start price and the
// coefficients per hour of the activity (env) and per CPU-hour.
type Price struct {
	Start   float64 `json:"start"`
	EnvHour float64 `json:"env_per_hour"`
	CPUHour float64 `json:"cpu_per_hour"`
}

// PerHour is what an hour costs with load CPU threads busy.
func (p Price) PerHour(load float64) float64 { return p.EnvHour + p.CPUHour*load }

// Total is what an agreement of d costs, started once.
func (p Price) Total(d time.Duration, load float64) float64 {
	return p.Start + p.PerHour(load)*d.Hours()
}

func (p Price) String() string {
	return fmt.Sprintf("start %s, %s/env-hour, %s/CPU-hour", glm(p.Start), glm(p.EnvHour), glm(p.CPUHour))
}

// glm formats an amount of GLM without float noise.
func glm(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) + " GLM" }

// PriceOf reads an offer's price. Only the linear model with the payu
// scheme is understood; any other, or a usage counter gcompose cannot
// estimate that costs something, is an error that says so: such an offer
// is skipped rather than guessed at.
func PriceOf(props map[string]any) (Price, error) {
	model, _ := props[PropPricingModel].(string)
	if model != "linear" {
		return Price{}, fmt.Errorf("pricing model %q is not understood (only linear)", model)
	}
	if s, ok := props[PropScheme].(string); ok && s != "payu" {
		return Price{}, fmt.Errorf("payment scheme %q is not understood (only payu)", s)
	}
	coeffs, ok := floats(props[PropLinearCoeffs])
	if !ok {
		return Price{}, fmt.Errorf("%s is not a list of numbers", PropLinearCoeffs)
	}
	vector, ok := props[PropUsageVector].([]any)
	if !ok || len(coeffs) != len(vector)+1 {
		return Price{}, fmt.Errorf("%s does not match %s (one coefficient per counter, then the start price)", PropLinearCoeffs, PropUsageVector)
	}
	var p Price
	for i, c := range coeffs {
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return Price{}, fmt.Errorf("%s has a negative or invalid coefficient %v", PropLinearCoeffs, c)
		}
		if i == len(vector) {
			p.Start = c
			break
		}
		switch name, _ := vector[i].(string); name {
		case counterDuration:
			p.EnvHour += c * 3600
		case counterCPU:
			p.CPUHour += c * 3600
		default:
			if c != 0 {
				return Price{}, fmt.Errorf("usage counter %q has a price, and gcompose cannot estimate its use", name)
			}
		}
	}
	return p, nil
}

func floats(v any) ([]float64, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]float64, len(l))
	for i, x := range l {
		f, ok := x.(float64)
		if !ok {
			return nil, false
		}
		out[i] = f
	}
	return out, true
}

// Offer is one provider's offer as the strategy judged it.
type Offer struct {
	ProposalID string
	Provider   string // node id
	Name       string // golem.node.id.name
	Subnet     string
	Price      Price
	// Cost is the score: GLM for the agreement's whole expiration under the
	// expected usage (lower is better).
	Cost float64
	// Skip says why the offer cannot be taken at all (unknown pricing, a
	// denied provider); Over names the cap it exceeds.
	Skip, Over string
	threads    float64
	memGib     float64
	props      map[string]any
}

// Who names the offer's provider for people.
func (o Offer) Who() string {
	if o.Name == "" {
		return o.Provider
	}
	return o.Name + " (" + o.Provider + ")"
}

// withinCaps tolerates float rounding of coefficients times 3600.
func withinCaps(v, limit float64) bool { return v <= limit*(1+1e-9)+1e-15 }

// Judge prices an offer and checks it against the caps and lists.
func (m Market) Judge(p *yagna.Proposal, exp time.Duration) Offer {
	o := Offer{ProposalID: p.ProposalID, Provider: p.IssuerID, props: p.Properties}
	o.Name, _ = p.Properties[PropNodeName].(string)
	o.Subnet, _ = p.Properties[PropSubnet].(string)
	o.threads, _ = p.Properties["golem.inf.cpu.threads"].(float64)
	o.memGib, _ = p.Properties["golem.inf.mem.gib"].(float64)
	named := func(l []string) bool {
		return slices.Contains(l, o.Provider) || (o.Name != "" && slices.Contains(l, o.Name))
	}
	switch {
	case named(m.Deny):
		o.Skip = "on the deny list (providers_deny)"
		return o
	case len(m.Allow) > 0 && !named(m.Allow):
		o.Skip = "not on the allow list (providers_allow)"
		return o
	}
	price, err := PriceOf(p.Properties)
	if err != nil {
		o.Skip = err.Error()
		return o
	}
	o.Price = price
	o.Cost = price.Total(exp, m.CPULoad)
	switch {
	case !withinCaps(price.Start, m.MaxStart):
		o.Over = fmt.Sprintf("start price %s is above max_start_price %s", glm(price.Start), glm(m.MaxStart))
	case !withinCaps(price.CPUHour, m.MaxCPUHour):
		o.Over = fmt.Sprintf("%s per CPU-hour is above max_cpu_per_hour %s", glm(price.CPUHour), glm(m.MaxCPUHour))
	case !withinCaps(price.EnvHour, m.MaxEnvHour):
		o.Over = fmt.Sprintf("%s per env-hour is above max_env_per_hour %s", glm(price.EnvHour), glm(m.MaxEnvHour))
	}
	return o
}

// Usable says whether the offer may be countered.
func (o Offer) Usable() bool { return o.Skip == "" && o.Over == "" }

// better orders offers best first: the lowest cost; on a tie the offer
// with more CPU threads, then more memory (more room for the same price),
// then by provider id so the order does not depend on arrival.
func better(a, b Offer) int {
	return cmp.Or(cmp.Compare(a.Cost, b.Cost), cmp.Compare(b.threads, a.threads), cmp.Compare(b.memGib, a.memGib),
		cmp.Compare(a.Provider, b.Provider))
}

// Rank returns the usable offers best first, keeping one offer (the
// latest) per provider.
func Rank(offers []Offer) []Offer {
	latest := map[string]Offer{}
	for _, o := range offers {
		if o.Usable() {
			latest[o.Provider] = o
		}
	}
	out := make([]Offer, 0, len(latest))
	for _, o := range latest {
		out = append(out, o)
	}
	slices.SortFunc(out, better)
	return out
}

// Cheapest is the priced offer (within the caps or not) that costs least,
// and false when no offer could be priced.
func Cheapest(offers []Offer) (Offer, bool) {
	var best Offer
	found := false
	for _, o := range offers {
		if o.Skip != "" {
			continue
		}
		if !found || better(o, best) < 0 {
			best, found = o, true
		}
	}
	return best, found
}

// NoOfferError is the error of a create that saw offers but none within
// the caps: it names the cheapest so the user knows what to raise.
func NoOfferError(offers []Offer, m Market, exp time.Duration) error {
	cheap, ok := Cheapest(offers)
	if !ok {
		var why []string
		for _, o := range offers {
			why = append(why, o.Who()+": "+o.Skip)
		}
		slices.Sort(why)
		why = slices.Compact(why)
		return fmt.Errorf("no usable offer among %d: %s", len(offers), strings.Join(why, "; "))
	}
	return fmt.Errorf("no offer within the price caps (max_start_price %s, max_cpu_per_hour %s, max_env_per_hour %s) among %d offers; the cheapest is %s at %s, %s/hour, %s for %s: %s",
		glm(m.MaxStart), glm(m.MaxCPUHour), glm(m.MaxEnvHour), len(offers), cheap.Who(), cheap.Price,
		glm(cheap.Price.PerHour(m.CPULoad)), glm(cheap.Cost), exp, cheap.Over)
}

// Explain is one line per offer considered, best first, for the user.
func Explain(offers []Offer, m Market, exp time.Duration) string {
	sorted := slices.Clone(offers)
	slices.SortFunc(sorted, func(a, b Offer) int {
		return cmp.Or(cmp.Compare(rankClass(a), rankClass(b)), better(a, b))
	})
	var b strings.Builder
	for _, o := range sorted {
		fmt.Fprintf(&b, "\n  %s subnet %s: ", o.Who(), o.Subnet)
		switch {
		case o.Skip != "":
			fmt.Fprintf(&b, "skipped: %s", o.Skip)
		default:
			fmt.Fprintf(&b, "%s -> %s/hour, %s for %s", o.Price, glm(o.Price.PerHour(m.CPULoad)), glm(o.Cost), exp)
			if o.Over != "" {
				fmt.Fprintf(&b, "; over the caps: %s", o.Over)
			}
		}
	}
	return b.String()
}

func rankClass(o Offer) int {
	switch {
	case o.Usable():
		return 0
	case o.Skip == "":
		return 1
	}
	return 2
}

// CapsPrice is the most the caps let an offer charge: the plan's estimate
// when the market is not asked.
func (m Market) CapsPrice() Price {
	return Price{Start: m.MaxStart, EnvHour: m.MaxEnvHour, CPUHour: m.MaxCPUHour}
}

// Agreed is the price of an agreement and what it comes to under the
// expected usage, recorded in the identity and shown in state.
type Agreed struct {
	Price
	GLMPerHour float64 `json:"glm_per_hour"`
	// Hours is the agreement's expiration; Total what it costs if the
	// service runs until then.
	Hours float64 `json:"hours"`
	Total float64 `json:"total"`
}

func agreedOf(p Price, m Market, exp time.Duration) *Agreed {
	return &Agreed{Price: p, GLMPerHour: p.PerHour(m.CPULoad), Hours: exp.Hours(), Total: p.Total(exp, m.CPULoad)}
}
