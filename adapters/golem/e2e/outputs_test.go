package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/lowering"
	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	golemproxy "github.com/gcompose/gcompose/adapters/golem/proxy"
	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/resolve"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// golemAdapters are the four Golem adapters by image role.
func golemAdapters() map[string]sdk.Adapter {
	return map[string]sdk.Adapter{"network": network.Adapter(), "service": service.Adapter(), "payments": payments.Adapter(), "proxy": golemproxy.Adapter()}
}

// declaredOutputs is the outputs schema an adapter's init answer declares.
func declaredOutputs(t *testing.T, a sdk.Adapter) map[string]any {
	t.Helper()
	init, err := a.Init(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if init.Gcompose == nil || init.Gcompose.Outputs == nil {
		t.Fatal("the init answer declares no outputs")
	}
	return init.Gcompose.Outputs
}

// Every Golem adapter declares its outputs (docs/golem.md's table), and
// every output the Golem lowering lets a descriptor reference on a service
// or a network is one its adapter declares: resolve accepts nothing the
// plan would then refuse or wait for in vain.
func TestGolemAdaptersDeclareTheirOutputs(t *testing.T) {
	want := map[string][]string{
		"network":  {"gateway", "ip", "mask", "network_id", "owner_id", "owner_ip", "state"},
		"service":  {"activity", "agreement", "logs", "network_node", "state"},
		"payments": {"allocation_id", "budget", "keeper", "platform", "state"},
		"proxy":    {"container", "ports", "service", "state", "target", "url"},
	}
	declared := map[string]map[string]any{}
	for role, a := range golemAdapters() {
		declared[role] = declaredOutputs(t, a)
		if got := plan.DeclaredOutputs(declared[role]); !slices.Equal(got, want[role]) {
			t.Errorf("golem-%s declares %v, want %v", role, got, want[role])
		}
	}
	for kind, role := range map[resolve.Kind]string{resolve.ServiceNode: "service", resolve.NetworkNode: "network"} {
		props := declared[role]["properties"].(map[string]any)
		for field, subs := range lowering.Outputs()[kind] {
			p, ok := props[field].(map[string]any)
			if !ok {
				t.Errorf("the lowering lets a %s's %s be referenced; golem-%s does not declare it", kind, field, role)
				continue
			}
			subProps, _ := p["properties"].(map[string]any)
			for _, s := range subs {
				if _, ok := subProps[s]; !ok {
					t.Errorf("the lowering lets a %s's %s.%s be referenced; golem-%s does not declare it", kind, field, s, role)
				}
			}
		}
	}
}
