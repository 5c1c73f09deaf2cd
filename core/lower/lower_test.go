package lower

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/resolve"
)

func resolved(t *testing.T, body string) *resolve.Resolved {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, p)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	r, diags := resolve.Resolve(app, resolve.Options{Outputs: (Generic{}).Outputs()})
	if diags.HasErrors() {
		t.Fatalf("resolve: %v", diags)
	}
	return r
}

func TestGenericLowersResourcesAsWritten(t *testing.T) {
	r := resolved(t, `
meta: {name: g}
resources:
  a: {type: img/a, config: {path: x}}
  b: {type: img/b, dependencies: {dep: a}, config: {from: "${resources.a.state.path}"}}
`)
	got, err := (Generic{}).Resources(r)
	if err != nil {
		t.Fatal(err)
	}
	a, b := got["resources.a"], got["resources.b"]
	if len(got) != 2 || a == nil || b == nil || a.Type != "img/a" || a.Config["path"] != "x" ||
		b.Config["from"] != "${resources.a.state.path}" || len(b.DependsOn) != 1 || b.DependsOn[0] != "resources.a" {
		t.Fatalf("lowered %+v", got)
	}
	if (Generic{}).Plugs() != nil {
		t.Fatal("the generic lowering offers plugs")
	}
}

func TestGenericRefusesServices(t *testing.T) {
	r := resolved(t, `
meta: {name: g}
payloads:
  p: {runtime: vm, params: {image: x}}
services:
  web: {payload: p}
`)
	if _, err := (Generic{}).Resources(r); err == nil || !strings.Contains(err.Error(), "services.web: services and networks need a lowering") {
		t.Fatalf("error %v", err)
	}
}
