package service

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func TestDemandOfPayload(t *testing.T) {
	c := Config{Payload: Payload{Name: "web", Runtime: "vm", Constraints: []string{"golem.inf.cpu.cores=2", "golem.inf.mem.gib>=4"},
		Capabilities: []string{"vpn"}, Params: map[string]any{"image_hash": "c37c1364f637c199fe710ca62241ff486db92c875b786814c6030aa1", "image_url": "http://images.example/web.gvmi"}}}
	if err := c.ResolveImage(context.Background(), noRegistry(t), nil, false); err != nil {
		t.Fatal(err)
	}
	tp, err := c.TaskPackage()
	if err != nil || tp != "hash:sha3:c37c1364f637c199fe710ca62241ff486db92c875b786814c6030aa1:http://images.example/web.gvmi" {
		t.Fatalf("TaskPackage = %q, %v", tp, err)
	}
	f, err := c.Constraints("(golem.com.payment.platform.erc20-holesky-tglm.address=*)")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(golem.runtime.name=vm)", "(golem.node.debug.subnet=public)", "(golem.inf.cpu.cores=2)",
		"(golem.inf.mem.gib>=4)", "(golem.runtime.capabilities=vpn)", "(golem.com.payment.platform.erc20-holesky-tglm.address=*)"} {
		if !strings.Contains(f, want) {
			t.Errorf("constraints %s lack %s", f, want)
		}
	}
	if !strings.HasPrefix(f, "(&") {
		t.Errorf("constraints %s are not AND-joined", f)
	}
	c.Payload.Params["subnet_tag"] = "devnet"
	if f, _ := c.Constraints(); !strings.Contains(f, "(golem.node.debug.subnet=devnet)") {
		t.Errorf("subnet_tag ignored: %s", f)
	}
	c.Payload.Params = nil
	if err := c.ResolveImage(context.Background(), noRegistry(t), nil, false); err == nil {
		t.Error("a vm payload without image_hash must fail")
	}
}

func TestPlannedIP(t *testing.T) {
	c := Config{IP: []string{"10.0.0.2", "10.0.0.3"}, Instance: 1}
	if c.PlannedIP() != "10.0.0.3" {
		t.Fatal(c.PlannedIP())
	}
	c.Instance = 2
	if c.PlannedIP() != "" {
		t.Fatal("an instance past the ip list gets the next free address")
	}
}

func TestRebuildForces(t *testing.T) {
	cfg := map[string]any{"name": "web", "payload": map[string]any{"runtime": "vm"}, "init": []any{"a"}, "allocation_id": "A1",
		"network": map[string]any{"id": "n1"}}
	applied := Fingerprints(cfg)
	same := map[string]any{"name": "web", "payload": map[string]any{"runtime": "vm"}, "init": []any{"a"}, "allocation_id": "A2",
		"network": map[string]any{"id": "n1"}, "http_proxy": map[string]any{"ports": []any{"80"}}}
	if f := rebuildForces(applied, same); len(f) != 0 {
		t.Fatalf("a new allocation or proxy must not rebuild: %v", f)
	}
	changed := map[string]any{"name": "web", "payload": map[string]any{"runtime": "vm"}, "init": []any{"b"}, "network": map[string]any{"id": "n2"}}
	if f := rebuildForces(applied, changed); !slices.Equal(f, []string{"/init", "/network"}) {
		t.Fatalf("forces = %v", f)
	}
	if f := rebuildForces(nil, changed); f != nil {
		t.Fatalf("no fingerprints recorded: no forces, got %v", f)
	}
}

// TestRuntimeCapabilitiesMinimums: vm/manifest asks for runtime vm with
// manifest-support, a service on a network asks for vpn, params.capabilities
// (dapp-runner's form) count, and VM demands carry yapapi's minimums unless
// params override them.
func TestRuntimeCapabilitiesMinimums(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		want    []string
		notWant []string
		fail    bool
	}{
		{"manifest", Config{Payload: Payload{Runtime: "vm/manifest"}},
			[]string{"(golem.runtime.name=vm)", "(golem.runtime.capabilities=manifest-support)", "(golem.inf.mem.gib>=0.5)", "(golem.inf.storage.gib>=2)", "(golem.inf.cpu.threads>=1)"},
			[]string{"vm/manifest", "capabilities=vpn"}, false},
		{"on a network", Config{Payload: Payload{Runtime: "vm"}, Network: &NetRef{Name: "default", ID: "n1"}},
			[]string{"(golem.runtime.name=vm)", "(golem.runtime.capabilities=vpn)"}, []string{"manifest-support"}, false},
		{"params capabilities kept, implicit ones added once", Config{Payload: Payload{Runtime: "vm/manifest", Capabilities: []string{"vpn"},
			Params: map[string]any{"capabilities": []any{"inet", "manifest-support"}}}, Network: &NetRef{ID: "n1"}},
			[]string{"(golem.runtime.capabilities=inet)", "(golem.runtime.capabilities=manifest-support)", "(golem.runtime.capabilities=vpn)"}, nil, false},
		{"minimums overridden", Config{Payload: Payload{Runtime: "vm", Params: map[string]any{"min_mem_gib": 4.0, "min_storage_gib": "10", "min_cpu_threads": 2.0}}},
			[]string{"(golem.inf.mem.gib>=4)", "(golem.inf.storage.gib>=10)", "(golem.inf.cpu.threads>=2)"}, []string{"0.5"}, false},
		{"other runtimes have no VM minimums", Config{Payload: Payload{Runtime: "wasmtime"}},
			[]string{"(golem.runtime.name=wasmtime)"}, []string{"golem.inf.mem.gib"}, false},
		{"bad minimum", Config{Payload: Payload{Runtime: "vm", Params: map[string]any{"min_mem_gib": "lots"}}}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := tt.cfg.Constraints()
			if (err != nil) != tt.fail {
				t.Fatalf("Constraints = %q, %v", f, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(f, w) {
					t.Errorf("%s lacks %s", f, w)
				}
				if strings.Count(f, w) > 1 {
					t.Errorf("%s has %s twice", f, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(f, w) {
					t.Errorf("%s has %s", f, w)
				}
			}
		})
	}
}

// TestTerms: the counter-proposal copies the offer's payment terms, clamped
// to what the keeper can meet (yapapi/strategy/base.py), and says why a
// provider cannot be met.
func TestTerms(t *testing.T) {
	offer := map[string]any{PropAcceptTimeout: 120.0, PropNoteInterval: 30.0, PropPaymentTimeout: 120.0}
	tests := []struct {
		name       string
		offer      map[string]any
		expiration time.Duration
		want       map[string]any
		fail       string
	}{
		{"short: the deadline only", offer, 3 * time.Hour, map[string]any{PropAcceptTimeout: int64(120)}, ""},
		{"long: mid-agreement payments, clamped", offer, 12 * time.Hour,
			map[string]any{PropAcceptTimeout: int64(120), PropNoteInterval: int64(60), PropPaymentTimeout: int64(18000)}, ""},
		{"long, values within bounds kept", map[string]any{PropAcceptTimeout: 240.0, PropNoteInterval: 120.0, PropPaymentTimeout: 36000.0}, 12 * time.Hour,
			map[string]any{PropAcceptTimeout: int64(240), PropNoteInterval: int64(120), PropPaymentTimeout: int64(36000)}, ""},
		{"long, no interval offered: no mid-agreement payments", map[string]any{PropAcceptTimeout: 240.0}, 12 * time.Hour,
			map[string]any{PropAcceptTimeout: int64(240)}, ""},
		{"deadline below what the keeper promises", map[string]any{PropAcceptTimeout: 3.0}, time.Hour, nil, "no less than 5s"},
		{"no deadline offered, long agreement", map[string]any{}, time.Hour, nil, "no agreement longer than 30m0s"},
		{"no deadline offered, short agreement", map[string]any{}, 20 * time.Minute, map[string]any{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Terms(tt.offer, tt.expiration)
			if tt.fail != "" {
				if err == nil || !strings.Contains(err.Error(), tt.fail) {
					t.Fatalf("Terms = %v, %v; want an error with %q", got, err, tt.fail)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Terms = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// A VPN member's create tags its demand with the config fingerprint the
// lowering gave it in vpn_members (its own entry: the one at its planned
// address), so that a later plan tells it kept from rebuilt (jointOf); the
// offer book's page leaves the tag out, so members of one app still share
// a page. A service on no VPN with others carries no tag. On the code
// before, the demand had no gcompose.config.
func TestDemandTagsConfigFingerprint(t *testing.T) {
	raw := `{"name": "web", "app": "shop", "node_ip": "192.168.0.3",
	  "payload": {"runtime": "vm", "capabilities": ["vpn"], "params": {"image_hash": "6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b", "image_url": "http://images.example/web.gvmi"}},
	  "vpn_members": [
	    {"service": "services.db", "name": "db", "node_ip": "192.168.0.2", "config": "0123456789abcdef"},
	    {"service": "services.web", "name": "web", "node_ip": "192.168.0.3", "config": "fedcba9876543210", "after": ["services.db"]}]}`
	demand := func(raw string) (yagna.DemandOfferBase, bookDemand) {
		t.Helper()
		var cfg Config
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			t.Fatal(err)
		}
		if err := cfg.ResolveImage(context.Background(), noRegistry(t), nil, false); err != nil {
			t.Fatal(err)
		}
		r := &rental{req: &sdk.Request{Request: protocol.Request{Name: cfg.Name}}, cfg: cfg}
		d, _, err := r.demand(context.Background(), "public")
		if err != nil {
			t.Fatal(err)
		}
		bd, err := broadDemand("http://yagna|k", cfg, "public", d)
		if err != nil {
			t.Fatal(err)
		}
		return d, bd
	}
	web, webPage := demand(raw)
	if got := web.Properties[tag.Config]; got != "fedcba9876543210" {
		t.Fatalf("demand tag %s = %v, want web's own vpn_members fingerprint", tag.Config, got)
	}
	if web.Properties[tag.Resource] != "web" {
		t.Errorf("demand tag %s = %v, want the adapter's name", tag.Resource, web.Properties[tag.Resource])
	}
	if _, ok := webPage.demand.Properties[tag.Config]; ok {
		t.Errorf("the book's page demand carries %s: %v", tag.Config, webPage.demand.Properties)
	}
	// db's demand: its own fingerprint, the same page.
	db := strings.NewReplacer(`"name": "web"`, `"name": "db"`, `"node_ip": "192.168.0.3",`, `"node_ip": "192.168.0.2",`).Replace(raw)
	dbDemand, dbPage := demand(db)
	if dbDemand.Properties[tag.Config] != "0123456789abcdef" {
		t.Errorf("db's demand tag %v, want db's fingerprint", dbDemand.Properties[tag.Config])
	}
	// The expiration is now + 3h, to the millisecond, of each demand's
	// making: a millisecond may pass between the two.
	delete(dbPage.demand.Properties, propExpiration)
	delete(webPage.demand.Properties, propExpiration)
	if dbPage.key != webPage.key || !reflect.DeepEqual(dbPage.demand.Properties, webPage.demand.Properties) {
		t.Errorf("db and web have different pages:\n%s %v\n%s %v", dbPage.key, dbPage.demand.Properties, webPage.key, webPage.demand.Properties)
	}
	// Alone on no VPN: no tag.
	alone, _ := demand(`{"name": "web", "app": "shop", "payload": {"runtime": "vm", "params": {"image_hash": "6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b", "image_url": "http://images.example/web.gvmi"}}}`)
	if _, ok := alone.Properties[tag.Config]; ok {
		t.Errorf("a service on no VPN tags its demand: %v", alone.Properties)
	}
}
