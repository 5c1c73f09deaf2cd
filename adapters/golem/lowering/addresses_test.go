package lowering

import (
	"encoding/json"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func nodeIPsOf(t *testing.T, file string) map[string]string {
	t.Helper()
	res, err := Resources(load(t, file), Images{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, r := range res {
		if ip, ok := r.Config[NodeIPKey].(string); ok {
			out[name] = ip
		}
	}
	return out
}

func TestPlannedNodeIPs(t *testing.T) {
	got := nodeIPsOf(t, "testdata/addresses.yaml")
	want := []string{"services.a", "services.b[0]", "services.b[1]", "services.b[2]", "services.c", "services.d[0]", "services.d[1]", "services.d[2]", "services.d[3]"}
	if len(got) != len(want) {
		t.Fatalf("planned %v, want one address for each of %v", got, want)
	}
	if got["services.c"] != "10.9.0.7" {
		t.Errorf("c: %s, want its descriptor address 10.9.0.7", got["services.c"])
	}
	seen := map[string]string{}
	for _, id := range want {
		ip := got[id]
		a, err := netip.ParseAddr(ip)
		if err != nil {
			t.Fatalf("%s: %q", id, ip)
		}
		net, owner, gateway := netip.MustParsePrefix("10.9.0.0/24"), "10.9.0.1", "10.9.0.254"
		if strings.HasPrefix(id, "services.d") {
			// /29: .1 is the requestor and the default gateway, .7 the broadcast
			net, owner, gateway = netip.MustParsePrefix("10.10.0.0/29"), "10.10.0.1", "10.10.0.1"
		}
		if !net.Contains(a) || ip == owner || ip == gateway || a == net.Addr() {
			t.Errorf("%s: %s is not a free host address of %s", id, ip, net)
		}
		if prev, dup := seen[ip]; dup {
			t.Errorf("%s and %s both at %s", prev, id, ip)
		}
		seen[ip] = id
	}
	if again := nodeIPsOf(t, "testdata/addresses.yaml"); !maps.Equal(again, got) {
		t.Errorf("second lowering %v differs from the first %v", again, got)
	}

	// Adding a service and another instance keeps the addresses planned before.
	src, err := os.ReadFile("testdata/addresses.yaml")
	if err != nil {
		t.Fatal(err)
	}
	grown := strings.Replace(string(src), "instances: 3}", "instances: 4}", 1) + "  zz: {payload: p, network: net}\n"
	file := filepath.Join(t.TempDir(), "grown.yaml")
	if err := os.WriteFile(file, []byte(grown), 0o644); err != nil {
		t.Fatal(err)
	}
	after := nodeIPsOf(t, file)
	for id, ip := range got {
		if after[id] != ip {
			t.Errorf("%s moved from %s to %s when a service was added", id, ip, after[id])
		}
	}
	if after["services.zz"] == "" || after["services.b[3]"] == "" {
		t.Errorf("new instances not planned: %v", after)
	}
}

func TestPlannedNodeIPsFull(t *testing.T) {
	src := "payloads:\n  p: {runtime: vm}\nnetworks:\n  n: {ip: \"10.0.0.0/30\"}\nservices:\n  s: {payload: p, network: n, instances: 2}\n"
	file := filepath.Join(t.TempDir(), "full.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Resources(load(t, file), Images{})
	if err == nil || !strings.Contains(err.Error(), "no free address left in network n") {
		t.Fatalf("err = %v, want no free address", err)
	}
}

// The services of one VPN each carry the list of its members for the plan's
// joint estimate: in the order apply creates them (web reads db's address,
// so db first, and web "after" it), each with its adapter's name, planned
// address, config fingerprint and only its market params. A change that
// rebuilds one member (web's init: hello.yaml) changes its fingerprint
// only.
func TestVPNMembers(t *testing.T) {
	res, err := Resources(load(t, "../../../examples/webapp/webapp.yaml", "testdata/vpn-members.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	db, web := res["services.db-service"].Config, res["services.web-service"].Config
	for name, cfg := range map[string]map[string]any{"db": db, "web": web} {
		got, err := json.Marshal(cfg[VPNMembersKey])
		if err != nil {
			t.Fatal(err)
		}
		want := `[{"config":"` + ConfigFingerprint(db) + `","name":"db-service","node_ip":"` + db[NodeIPKey].(string) + `","params":{"max_cpu_per_hour":0.5},"service":"services.db-service"},` +
			`{"after":["services.db-service"],"config":"` + ConfigFingerprint(web) + `","name":"web-service","node_ip":"` + web[NodeIPKey].(string) + `","params":{"providers_deny":["x"]},"service":"services.web-service"}]`
		if string(got) != want {
			t.Errorf("%s: vpn_members\n%s\nwant\n%s", name, got, want)
		}
	}
	if f := ConfigFingerprint(web); len(f) != 16 || f == ConfigFingerprint(db) {
		t.Errorf("fingerprints db %s, web %s: want 16 hex digits each, distinct", ConfigFingerprint(db), f)
	}
	hello, err := Resources(load(t, "../../../examples/webapp/webapp.yaml", "testdata/vpn-members.yaml", "../../../examples/webapp/hello.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	members := func(cfg map[string]any) map[string]string {
		out := map[string]string{}
		for _, e := range cfg[VPNMembersKey].([]any) {
			m := e.(map[string]any)
			out[m["service"].(string)] = m["config"].(string)
		}
		return out
	}
	was, now := members(db), members(hello["services.db-service"].Config)
	if now["services.db-service"] != was["services.db-service"] || now["services.web-service"] == was["services.web-service"] {
		t.Errorf("web's init changed: fingerprints %v, were %v; want web's only changed", now, was)
	}
	// What the plan's state call compares for a rebuild changes the
	// fingerprint; what it does not (the market params) leaves it.
	for _, tc := range []struct {
		field string
		value any
		same  bool
	}{{"init", []any{}, false}, {"ip", []any{"10.0.0.9"}, false}, {NodeIPKey, "10.0.0.9", false}, {"network", map[string]any{"name": "other"}, false}, {"payload", map[string]any{"runtime": "vm"}, false}, {"instance", 3, true}, {VPNMembersKey, []any{}, true}} {
		c := maps.Clone(web)
		c[tc.field] = tc.value
		if same := ConfigFingerprint(c) == ConfigFingerprint(web); same != tc.same {
			t.Errorf("%s changed: fingerprint the same %v, want %v", tc.field, same, tc.same)
		}
	}
	if _, ok := res["resources.golem-proxy-web-service"].Config[VPNMembersKey]; ok {
		t.Error("the local proxy lists VPN members")
	}
}
