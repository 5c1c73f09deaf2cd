package service

import (
	"strings"
	"testing"
	"time"
)

// judged is the market as the estimate sees it: offers judged by some
// Market (each claimant judges them again).
func judged(m Market, exp time.Duration, skip map[string]string, ps ...[2]any) []Offer {
	var out []Offer
	for _, p := range ps {
		id := p[0].(string)
		o := m.Judge(offer(id, "prov-"+id, p[1].([]any), nil), exp)
		if why, ok := skip[id]; ok {
			o.Skip = why
		}
		out = append(out, o)
	}
	return out
}

// The members of one VPN are planned together, as apply's creates take
// them: distinct providers, each at its own price and within its own caps;
// one left without a provider is a conflict that names who took what.
func TestAssignDistinctProviders(t *testing.T) {
	exp := 3 * time.Hour
	wide := Market{MaxStart: 1, MaxCPUHour: 1, MaxEnvHour: 1, CPULoad: 1}
	// cheap: 0.36/h, dear: 0.72/h (env + cpu per second coefficients).
	cheap := [2]any{"cheap", []any{0.00005, 0.00005, 0.0}}
	dear := [2]any{"dear", []any{0.0001, 0.0001, 0.0}}
	tight := Market{MaxStart: 1, MaxCPUHour: 0.2, MaxEnvHour: 0.2, CPULoad: 1} // admits cheap only
	onlyDear := Market{MaxStart: 1, MaxCPUHour: 1, MaxEnvHour: 1, CPULoad: 1, Allow: []string{"prov-dear"}}

	t.Run("two members, two offers: each its own, at its own price", func(t *testing.T) {
		as := assign(judged(wide, exp, nil, dear, cheap), []claimant{{Service: "services.db", Market: wide}, {Service: "services.web", Market: wide}}, exp)
		if !as[0].OK || as[0].Offer.Provider != "cheap" || !as[1].OK || as[1].Offer.Provider != "dear" {
			t.Fatalf("assigned %+v", as)
		}
		if as[0].Offer.Cost >= as[1].Offer.Cost {
			t.Fatalf("both at one price: %v, %v", as[0].Offer.Cost, as[1].Offer.Cost)
		}
		note := jointNote("default", as, 1)
		for _, want := range []string{"2 services of VPN default", "services.db on prov-cheap (cheap)", "may cost less: apply rents it and services.db at once"} {
			if !strings.Contains(note, want) {
				t.Errorf("note of the second %q lacks %q", note, want)
			}
		}
		if note := jointNote("default", as, 0); !strings.Contains(note, "may cost more") || !strings.Contains(note, "services.web") {
			t.Errorf("note of the first %q does not say the second may take its offer", note)
		}
	})
	t.Run("a member created after the other for certain: no race to tell", func(t *testing.T) {
		as := assign(judged(wide, exp, nil, dear, cheap), []claimant{{Service: "services.db", Market: wide}, {Service: "services.web", Market: wide, After: []string{"services.db"}}}, exp)
		if n := jointNote("default", as, 1); !strings.Contains(n, "services.db on prov-cheap (cheap)") || strings.Contains(n, "may cost") {
			t.Errorf("note of the second %q", n)
		}
		if n := jointNote("default", as, 0); strings.Contains(n, "may cost") {
			t.Errorf("note of the first %q", n)
		}
	})
	t.Run("caps admitting one provider for two: the second is left without", func(t *testing.T) {
		as := assign(judged(tight, exp, nil, dear, cheap), []claimant{{Service: "services.db", Market: tight}, {Service: "services.web", Market: tight}}, exp)
		if !as[0].OK || as[0].Offer.Provider != "cheap" || as[1].OK {
			t.Fatalf("assigned %+v", as)
		}
		msg := conflict("default", as, 1)
		for _, want := range []string{"2 services on VPN default need distinct providers (services.db, services.web)", "1 offer(s) are within the caps of services.web: prov-cheap (cheap)", "services.db takes prov-cheap (cheap)"} {
			if !strings.Contains(msg, want) {
				t.Errorf("conflict %q lacks %q", msg, want)
			}
		}
	})
	t.Run("each member judges by its own caps and lists", func(t *testing.T) {
		as := assign(judged(wide, exp, nil, dear, cheap), []claimant{{Service: "services.db", Market: onlyDear}, {Service: "services.web", Market: tight}}, exp)
		if !as[0].OK || as[0].Offer.Provider != "dear" || !as[1].OK || as[1].Offer.Provider != "cheap" {
			t.Fatalf("assigned %+v", as)
		}
	})
	t.Run("a provider skipped for all stays skipped; a list's skip is each member's", func(t *testing.T) {
		offers := judged(onlyDear, exp, map[string]string{"dear": "already a node of the VPN at 192.168.0.3 for another service"}, dear, cheap)
		if offers[1].Skip == "" {
			t.Fatal("the allow list did not skip prov-cheap for the member that judged it")
		}
		as := assign(offers, []claimant{{Service: "services.web", Market: wide}}, exp)
		if !as[0].OK || as[0].Offer.Provider != "cheap" || len(as[0].Within) != 1 {
			t.Fatalf("assigned %+v", as)
		}
	})
}
