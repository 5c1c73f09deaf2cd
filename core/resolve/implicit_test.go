package resolve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
)

func loadBody(t *testing.T, body string) *descriptor.App {
	t.Helper()
	path := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, path)
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return app
}

// The outputs section may read a resource the lowering adds; a node may
// not (it would be an edge to a resource the graph does not hold), and
// without the lowering saying so the name is unknown.
func TestImplicitResourcesInOutputs(t *testing.T) {
	const body = `
meta: {name: i}
resources:
  a: {type: img/a, config: {x: "X"}}
outputs:
  url: ${resources.golem-proxy-web.state.url}
`
	implicit := func(name string) bool { return strings.HasPrefix(name, "golem-proxy-") }
	for _, tc := range []struct {
		name     string
		body     string
		implicit func(string) bool
		want     string // "" : no error
	}{
		{"outputs read it", body, implicit, ""},
		{"unknown without the lowering", body, nil, `no resource named "golem-proxy-web"`},
		{"only its state", strings.Replace(body, ".state.url", ".url", 1), implicit, "reads its state"},
		{"not from a node", strings.Replace(body, `x: "X"`, `x: "${resources.golem-proxy-web.state.url}"`, 1), implicit, "only the outputs section can read its state"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := loadBody(t, tc.body)
			r, diags := Resolve(app, Options{Implicit: tc.implicit})
			switch {
			case tc.want == "" && diags.HasErrors():
				t.Fatalf("diagnostics: %v", diags)
			case tc.want == "":
				if got := r.Outputs["url"]; got != "${resources.golem-proxy-web.state.url}" {
					t.Fatalf("outputs.url = %v, want the reference kept for after apply", got)
				}
			case !diags.HasErrors() || !strings.Contains(diags.Errors()[0].String(), tc.want):
				t.Fatalf("diagnostics %v, want %q", diags, tc.want)
			}
		})
	}
}
