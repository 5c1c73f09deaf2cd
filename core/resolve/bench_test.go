package resolve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/internal/benchmetrics"
)

// genApp builds n services, each (but the first) with two runtime
// references to earlier services, so 2n-2 reference edges and n network
// edges, plus a static reference each.
func genApp(n int) *descriptor.App {
	app := &descriptor.App{
		Name:     "big",
		Payloads: map[string]*descriptor.Payload{"p": {Name: "p", Runtime: "vm", Params: map[string]any{"image": "img"}}},
		Networks: map[string]*descriptor.Network{"net": {Name: "net", IP: "10.0.0.0/8"}},
		Services: make(map[string]*descriptor.Service, n),
	}
	for i := 0; i < n; i++ {
		args := []string{"run", "${payloads.p.params.image}"}
		if i > 0 {
			args = append(args, fmt.Sprintf("--prev=${services.s%d.network_node.ip}", i-1),
				fmt.Sprintf("--half=${services.s%d.network_node.ip}", i/2))
		}
		name := fmt.Sprintf("s%d", i)
		app.Services[name] = &descriptor.Service{Name: name, Payload: "p", Network: "net", Instances: 1,
			Init: []descriptor.Command{{Run: &descriptor.RunCommand{Args: args}}}}
	}
	return app
}

func BenchmarkResolve10kServices20kRefs(b *testing.B) {
	app := genApp(10000)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchmetrics.CPU()
	for i := 0; i < b.N; i++ {
		r, diags := Resolve(app, Options{Outputs: testOutputs})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if r.Edges < 29000 {
			b.Fatalf("edges = %d", r.Edges)
		}
	}
	benchmetrics.ReportCPU(b, cpu)
}

// The whole validate path on a generated file: load (parse, schema,
// semantic checks) and resolve.
func BenchmarkLoadAndResolve10k(b *testing.B) {
	var y strings.Builder
	y.WriteString("payloads:\n  p:\n    runtime: vm\n    params: {image: img}\nnetworks:\n  net:\n    ip: 10.0.0.0/8\nservices:\n")
	for i := 0; i < 10000; i++ {
		fmt.Fprintf(&y, "  s%d:\n    payload: p\n    network: net\n    init:\n      - run:\n          args: [\"run\"", i)
		if i > 0 {
			fmt.Fprintf(&y, ", \"--prev=${services.s%d.network_node.ip}\", \"--half=${services.s%d.network_node.ip}\"", i-1, i/2)
		}
		y.WriteString("]\n")
	}
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := benchmetrics.CPU()
	for i := 0; i < b.N; i++ {
		app, diags := descriptor.Load(context.Background(), descriptor.Options{}, path)
		if diags.HasErrors() {
			b.Fatal(diags)
		}
		if _, diags := Resolve(app, Options{Outputs: testOutputs}); diags.HasErrors() {
			b.Fatal(diags)
		}
	}
	benchmetrics.ReportCPU(b, cpu)
	benchmetrics.ReportPeakRSS(b)
}
