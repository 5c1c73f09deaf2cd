package service

import (
	"slices"
	"strings"
	"testing"
)

func TestDemandOfPayload(t *testing.T) {
	c := Config{Payload: Payload{Name: "web", Runtime: "vm", Constraints: []string{"golem.inf.cpu.cores=2", "golem.inf.mem.gib>=4"},
		Capabilities: []string{"vpn"}, Params: map[string]any{"image_hash": "c37c1364f637c199fe710ca62241ff486db92c875b786814c6030aa1"}}}
	tp, err := c.TaskPackage()
	if err != nil || !strings.HasPrefix(tp, "hash:sha3:c37c1364f637c199fe710ca62241ff486db92c875b786814c6030aa1:http") {
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
	if _, err := c.TaskPackage(); err == nil {
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
