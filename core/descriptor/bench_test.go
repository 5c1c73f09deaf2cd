package descriptor

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// bigDescriptor generates a descriptor of n services, each with two init
// commands holding one ${...} reference each (2n references), an address in
// one /16 network and an HTTP proxy port; and an override touching every
// tenth service.
func bigDescriptor(n int) (base, override []byte) {
	var b strings.Builder
	b.WriteString("meta:\n  name: big\npayloads:\n")
	for p := 0; p < 10; p++ {
		fmt.Fprintf(&b, "  p%d:\n    runtime: vm\n    capabilities: [vpn]\n    params: {image_hash: \"%056d\"}\n", p, p)
	}
	b.WriteString("networks:\n  net:\n    ip: 10.0.0.0/16\nservices:\n")
	for i := 0; i < n; i++ {
		prev := (i + n - 1) % n
		fmt.Fprintf(&b, "  svc-%d:\n    payload: p%d\n    network: net\n    ip: [10.0.%d.%d]\n", i, i%10, (i+2)/250, (i+2)%250+1)
		fmt.Fprintf(&b, "    init:\n      - run: {args: [/bin/sh, -c, \"connect ${services.svc-%d.network_node.ip}\"]}\n", prev)
		fmt.Fprintf(&b, "      - [/bin/echo, \"${payloads.p%d.runtime}\"]\n", i%10)
		fmt.Fprintf(&b, "    http_proxy: {ports: [\"%d:80\"]}\n", 10000+i)
	}
	var o strings.Builder
	o.WriteString("payloads:\n  p0:\n    capabilities: [gpu]\nservices:\n")
	for i := 0; i < n; i += 10 {
		fmt.Fprintf(&o, "  svc-%d:\n    instances: 1\n    depends_on: [svc-%d]\n", i, (i+1)%n)
	}
	return []byte(b.String()), []byte(o.String())
}

func TestBigDescriptorLoads(t *testing.T) {
	base, override := bigDescriptor(500)
	app, ds := newTestLoader(t, Options{}).LoadSources(context.Background(),
		Source{Name: "big.yaml", Data: base}, Source{Name: "override.yaml", Data: override})
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if len(app.Services) != 500 || len(app.Services["svc-0"].DependsOn) != 1 || len(app.Payloads["p0"].Capabilities) != 2 {
		t.Errorf("unexpected app: %d services", len(app.Services))
	}
}

// BenchmarkLoad10k loads, merges, validates and normalizes 10,000 services
// with 20,000 references (the compiled schema is built once, outside).
func BenchmarkLoad10k(b *testing.B) {
	base, override := bigDescriptor(10_000)
	l := newTestLoader(b, Options{})
	ctx := context.Background()
	b.SetBytes(int64(len(base) + len(override)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		app, ds := l.LoadSources(ctx, Source{Name: "big.yaml", Data: base}, Source{Name: "override.yaml", Data: override})
		if len(ds) > 0 || len(app.Services) != 10_000 {
			b.Fatalf("%d services, %v", len(app.Services), ds)
		}
	}
}
