package service

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
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

// jointOf counts as claimants the service itself and the members whose
// planned address no node of the VPN holds (they rent now); a member that
// runs keeps its provider. Providers that are nodes at another address are
// skipped, as the create skips them. Without the VPN (a first plan), every
// member rents now.
func TestJointOfClaimants(t *testing.T) {
	yagnaSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/net/n-1/nodes") {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		// db runs at .2; web's old node still holds its own address .3.
		_ = json.NewEncoder(w).Encode([]map[string]string{{"id": "0xdb", "ip": "192.168.0.2"}, {"id": "0xwebold", "ip": "192.168.0.3"}})
	}))
	defer yagnaSrv.Close()
	yc := yagna.New(yagnaSrv.URL, "k")
	members := []VPNMember{
		{Service: "services.db", NodeIP: "192.168.0.2", Params: map[string]any{"max_cpu_per_hour": 0.5}},
		{Service: "services.web", NodeIP: "192.168.0.3", After: []string{"services.db"}},
		{Service: "services.cache", NodeIP: "192.168.0.4", Params: map[string]any{"providers_deny": []any{"x"}}},
	}
	cfg := Config{Name: "web", Network: &NetRef{Name: "default", ID: "n-1"}, NodeIP: "192.168.0.3",
		Payload: Payload{Runtime: "vm", Params: map[string]any{"max_cpu_per_hour": 0.9}}}
	m, err := cfg.Market()
	if err != nil {
		t.Fatal(err)
	}
	j, err := jointOf(t.Context(), yc, "web-0", "", "", cfg, members, m, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range j.claimants {
		names = append(names, c.Service)
	}
	if strings.Join(names, ",") != "services.web,services.cache" || j.me != 0 {
		t.Fatalf("claimants %v (me %d), want web (itself) then cache (not running); db runs", names, j.me)
	}
	if j.claimants[0].Market.MaxCPUHour != 0.9 || len(j.claimants[1].Market.Deny) != 1 || j.claimants[1].Market.MaxCPUHour != DefaultMaxCPUPerHour {
		t.Errorf("markets %+v: each member's own caps and lists", j.claimants)
	}
	if _, ok := j.inVPN["0xdb"]; !ok {
		t.Errorf("db's provider, a node at another address, is not skipped: %v", j.inVPN)
	}
	if _, ok := j.inVPN["0xwebold"]; ok {
		t.Errorf("the node at web's own planned address is skipped: %v", j.inVPN)
	}

	// A first plan: the VPN's id is a reference, every member rents now.
	cfg.Network.ID = "${networks.default.network_id}"
	j, err = jointOf(t.Context(), yc, "web-0", "", "", cfg, members, m, time.Hour)
	if err != nil || len(j.claimants) != 3 || j.me != 1 {
		t.Fatalf("first plan: %+v, %v: want all 3 members, web second", j, err)
	}
}

// A member that runs but this deploy rebuilds (its rental's agreement,
// found by provider and by the resource tag, carries another config
// fingerprint than the member's now) rents anew: it is a claimant, and its
// old provider is free, at its agreed price, only for the members created
// after it. A member whose fingerprint is unchanged keeps its provider; an
// agreement of another resource on a member's provider, or of another app,
// says nothing of it. On the code before, cache counted as keeping 0xcache
// and web took the only free offer alone.
func TestJointOfRebuiltMember(t *testing.T) {
	const app = "shop"
	agreed := func(provider, resource, config, forApp string, coeffs []any) yagna.Agreement {
		return yagna.Agreement{AgreementID: "ag-" + provider + "-" + resource, State: yagna.AgreementApproved,
			Demand: yagna.Demand{Properties: map[string]any{tag.App: forApp, tag.Resource: resource, tag.Config: config}},
			Offer:  yagna.Offer{ProviderID: provider, Properties: offer(provider, "prov-"+provider, coeffs, nil).Properties}}
	}
	cheap, dear := []any{0.00005, 0.00005, 0.0}, []any{0.0001, 0.0001, 0.0}
	agreements := []yagna.Agreement{
		agreed("0xdb", "db", "db-v1", app, dear),            // db: config unchanged, keeps it
		agreed("0xcache", "cache", "cache-v1", app, cheap),  // cache: rebuilt (now cache-v2)
		agreed("0xcache", "services.cache", "x", app, dear), // the address is no tag: says nothing
		agreed("0xdb", "db", "other", "another-app", dear),  // another app's: says nothing
	}
	var asked []string
	failList := false
	yagnaSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		switch {
		case failList && r.URL.Path == yagna.MarketPrefix+"/agreements":
			http.Error(w, "down", http.StatusBadRequest)
		case strings.HasSuffix(r.URL.Path, "/net/n-1/nodes"):
			_ = json.NewEncoder(w).Encode([]map[string]string{{"id": "0xdb", "ip": "192.168.0.2"}, {"id": "0xcache", "ip": "192.168.0.4"}})
		case r.URL.Path == yagna.MarketPrefix+"/agreements":
			if r.URL.Query().Get("appSessionId") != tag.SessionID(app) || r.URL.Query().Get("state") != string(yagna.AgreementApproved) {
				http.Error(w, "unexpected query "+r.URL.RawQuery, http.StatusBadRequest)
				return
			}
			var list []yagna.AgreementListEntry
			for _, a := range agreements {
				list = append(list, yagna.AgreementListEntry{ID: a.AgreementID})
			}
			_ = json.NewEncoder(w).Encode(list)
		case strings.HasPrefix(r.URL.Path, yagna.MarketPrefix+"/agreements/"):
			for _, a := range agreements {
				if strings.HasSuffix(r.URL.Path, "/"+a.AgreementID) {
					_ = json.NewEncoder(w).Encode(a)
					return
				}
			}
			http.Error(w, "no agreement", http.StatusNotFound)
		default:
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
		}
	}))
	defer yagnaSrv.Close()
	yc := yagna.New(yagnaSrv.URL, "k")
	exp := 3 * time.Hour
	members := []VPNMember{
		{Service: "services.cache", Name: "cache", NodeIP: "192.168.0.4", Config: "cache-v2"},
		{Service: "services.db", Name: "db", NodeIP: "192.168.0.2", Config: "db-v1"},
		{Service: "services.web", Name: "web", NodeIP: "192.168.0.3", Config: "web-v1"},
		{Service: "services.api", Name: "api", NodeIP: "192.168.0.5", Config: "api-v1", After: []string{"services.cache"}},
	}
	wide := map[string]any{"max_cpu_per_hour": 1.0, "max_env_per_hour": 1.0}
	cfg := Config{Name: "web", Network: &NetRef{Name: "default", ID: "n-1"}, NodeIP: "192.168.0.3", VPNMembers: members,
		Payload: Payload{Runtime: "vm", Params: wide}}
	m, err := cfg.Market()
	if err != nil {
		t.Fatal(err)
	}
	j, err := jointOf(t.Context(), yc, "web", app, "", cfg, members, m, exp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range j.claimants {
		names = append(names, c.Service)
	}
	if strings.Join(names, ",") != "services.cache,services.web,services.api" || j.me != 1 {
		t.Fatalf("claimants %v (me %d), want cache (rebuilt), web (itself), api (new); db keeps its provider\nasked %v", names, j.me, asked)
	}
	if len(j.claimants[0].Freed) != 0 || len(j.claimants[1].Freed) != 0 {
		t.Errorf("cache's old provider is offered to a member not created after cache: %+v", j.claimants)
	}
	f := j.claimants[2].Freed
	if len(f) != 1 || f[0].Provider != "0xcache" || f[0].ProposalID != "" || math.Abs(f[0].Price.EnvHour-0.18) > 1e-9 || j.freedBy["0xcache"] != "services.cache" {
		t.Fatalf("api, created after cache, is offered %+v (freed by %v), want 0xcache at its agreed price", f, j.freedBy)
	}

	// One offer on the market (0xdb and 0xcache are nodes: skipped): the
	// rebuilt cache and web both need it; api takes cache's old provider.
	offers := j.skip(judged(m, exp, nil, [2]any{"0xfree", dear}, [2]any{"0xdb", dear}, [2]any{"0xcache", dear}))
	as := assign(offers, j.claimants, exp)
	if !as[0].OK || as[0].Offer.Provider != "0xfree" || as[1].OK || !as[2].OK || as[2].Offer.Provider != "0xcache" {
		t.Fatalf("assigned %+v: want cache on 0xfree, web on none, api on 0xcache", as)
	}
	if msg := conflict(j.network, as, j.me); !strings.Contains(msg, "services.cache takes prov-0xfree (0xfree)") {
		t.Errorf("conflict %q does not name the rebuilt member", msg)
	}

	// The same members, none rebuilt: cache keeps its provider; web takes
	// the free offer.
	members[0].Config = "cache-v1"
	j, err = jointOf(t.Context(), yc, "web", app, "", cfg, members, m, exp)
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, c := range j.claimants {
		names = append(names, c.Service)
	}
	if strings.Join(names, ",") != "services.web,services.api" || len(j.claimants[1].Freed) != 0 {
		t.Fatalf("claimants %v, want web and api, nothing freed: %+v", names, j.claimants)
	}

	// The agreements cannot be listed: the members that run are counted
	// as keeping their providers (the estimate goes on, as before).
	members[0].Config, failList = "cache-v2", true
	j, err = jointOf(t.Context(), yc, "web", app, "", cfg, members, m, exp)
	if err != nil || len(j.claimants) != 2 || j.claimants[0].Service != "services.web" {
		t.Fatalf("agreements not listed: %+v, %v: want web and api, cache kept", j.claimants, err)
	}
}
