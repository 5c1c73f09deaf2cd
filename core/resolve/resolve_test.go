package resolve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/internal/golden"
)

// header reads "# vars: k=v k=v" and "# env: K=V" comment lines at the top of
// a test descriptor into Options.
func header(t *testing.T, path string) Options {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars, env := map[string]string{}, map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			break
		}
		for prefix, into := range map[string]map[string]string{"# vars:": vars, "# env:": env} {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				for _, kv := range strings.Fields(rest) {
					k, v, _ := strings.Cut(kv, "=")
					into[k] = v
				}
			}
		}
	}
	return Options{Vars: vars, Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Outputs: testOutputs}
}

// render prints everything Resolve produced, for golden comparison.
func render(r *Resolved, diags fmt.Stringer) string {
	var b strings.Builder
	if s := diags.String(); s != "" {
		b.WriteString("diagnostics:\n" + s + "\n")
	}
	fmt.Fprintf(&b, "summary: %s\n", r.Summary())
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "\nnode %s kind=%s name=%s index=%d/%d entry=%s pos=%s\n", n.ID, n.Kind, n.Name, n.Index, n.Instances, n.Entry, n.Pos)
		var spec bytes.Buffer
		enc := json.NewEncoder(&spec)
		enc.SetEscapeHTML(false)
		enc.SetIndent("  ", "  ")
		_ = enc.Encode(n.Spec)
		fmt.Fprintf(&b, "  spec: %s", spec.String())
		for _, tp := range n.Templates {
			fmt.Fprintf(&b, "  template: %s\n", tp)
		}
		for _, rr := range n.Runtime {
			fmt.Fprintf(&b, "  runtime: %s -> %s . %s at %s (%s)\n", rr.Text, rr.Target, rr.Field, rr.Pos, rr.Pointer)
		}
	}
	b.WriteString("\nedges:\n")
	for _, e := range r.Graph.Edges() {
		fmt.Fprintf(&b, "  %s: %s\n", e.Pos, e.Describe())
	}
	return b.String()
}

type diagString string

func (d diagString) String() string { return string(d) }

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata")
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			app, loadDiags := descriptor.Load(context.Background(), descriptor.Options{}, f)
			if app == nil {
				t.Fatalf("load: %v", loadDiags)
			}
			r, diags := Resolve(app, header(t, f))
			for _, d := range diags {
				// A diagnostic about a reference points at its "${".
				if strings.HasPrefix(d.Message, "${") && d.Pos.Line > 0 {
					lines := strings.Split(string(mustRead(t, d.Pos.File)), "\n")
					line := lines[d.Pos.Line-1]
					if d.Pos.Col > len(line) || !strings.HasPrefix(line[d.Pos.Col-1:], "${") {
						t.Errorf("%s does not point at a reference: %q", d, line)
					}
				}
			}
			got := render(r, diagString(diags.Error()))
			if len(loadDiags) > 0 {
				got = "load:\n" + loadDiags.Error() + "\n" + got
			}
			golden.Check(t, filepath.Join("testdata", name+".golden"), []byte(got))
			if !diags.HasErrors() { // what `gcompose graph` prints
				var dot bytes.Buffer
				if err := r.Graph.WriteDOT(&dot); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, filepath.Join("testdata", name+".dot"), dot.Bytes())
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every conformance descriptor (kept by the descriptor package) loads and
// resolves without error, and GAP-16's webapp gets its reference edge: each
// web instance depends on db-service through ${services.db-service...}.
func TestConformanceResolves(t *testing.T) {
	files, err := filepath.Glob("../descriptor/testdata/conformance/*/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no conformance descriptors in ../descriptor/testdata/conformance (%v)", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			app, diags := descriptor.Load(context.Background(), descriptor.Options{}, f)
			if diags.HasErrors() {
				t.Fatalf("does not load: %v", diags.Errors())
			}
			r, diags := Resolve(app, Options{Env: func(string) (string, bool) { return "", false }, Outputs: testOutputs})
			if diags.HasErrors() {
				t.Fatalf("%v", diags)
			}
			if _, err := r.Graph.TopoOrder(); err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) != "webapp.gaom.yaml" {
				return
			}
			for _, web := range []string{"services.web-server-service[0]", "services.web-server-service[1]"} {
				var ref bool
				for _, e := range r.Graph.EdgesBetween(web, "services.db-service") {
					ref = ref || e.Kind == graph.Reference
				}
				if !ref {
					t.Errorf("%s has no reference edge to services.db-service: %v", web, r.Graph.EdgesBetween(web, "services.db-service"))
				}
			}
		})
	}
}

// testOutputs are the outputs a lowering declares for services and
// networks: those of the Golem adapters (adapters/golem/lowering.Outputs),
// which this package cannot import.
var testOutputs = map[Kind]map[string][]string{
	ServiceNode: {"network_node": {"ip", "node_id"}, "agreement": {"id", "provider_id", "provider_name"}, "activity": {"id"}, "state": nil, "proxy": nil},
	NetworkNode: {"network_id": nil, "owner_id": nil, "state": nil},
}
