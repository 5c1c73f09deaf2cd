package resolve

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/expr"
)

func TestBindEvaluatesRuntimeReferences(t *testing.T) {
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, "testdata/static.yaml")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	r, diags := Resolve(app, header(t, "testdata/static.yaml"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	outputs := map[string]map[string]any{
		"services.db":      {"network_node": map[string]any{"ip": "192.168.0.10", "node_id": "0xabc"}},
		"networks.default": {"network_id": "net-1"},
		"resources.store":  {"state": map[string]any{"size": int64(42)}},
		"app":              {"id": "app-7"},
	}
	get := func(id string) (map[string]any, bool) { o, ok := outputs[id]; return o, ok }

	spec, unknown, err := r.Node("resources.index").Bind(get)
	if err != nil || len(unknown) > 0 {
		t.Fatalf("bind: %v %v", err, unknown)
	}
	cfg := spec["config"].(map[string]any)
	if cfg["size"] != int64(42) || cfg["net"] != "net-1" || cfg["path"] != "/data/shop/index" {
		t.Errorf("config = %#v", cfg)
	}
	if r.Node("resources.index").Spec["config"].(map[string]any)["size"] != "${resources.store.state.size}" {
		t.Error("Bind modified the node's Spec")
	}

	// A literal "${" (from "$${") stays text; ${app.id} comes from Outputs("app").
	spec, _, err = r.Node("services.db").Bind(get)
	if err != nil {
		t.Fatal(err)
	}
	args := spec["init"].([]any)[0].(map[string]any)["run"].(map[string]any)["args"].([]any)
	if args[2] != "${HOME} is /home/golem" || args[6] != "app-7" {
		t.Errorf("args = %q", args)
	}

	// Outputs not there yet are reported, and their strings stay templates.
	delete(outputs, "resources.store")
	spec, unknown, err = r.Node("resources.index").Bind(get)
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || unknown[0].Pointer != "/config/size" || unknown[0].Ref.String() != "resources.store.state.size" {
		t.Errorf("unknown = %+v", unknown)
	}
	if spec["config"].(map[string]any)["size"] != "${resources.store.state.size}" {
		t.Errorf("size = %v", spec["config"])
	}
}

func TestSplitRuntimeRef(t *testing.T) {
	for in, want := range map[string]string{
		"services.web[1].network_node.ip": "services.web[1] network_node.ip",
		"services.db.agreement.id":        "services.db agreement.id",
		"resources.store.state.a[0]":      "resources.store state.a[0]",
		"app.id":                          "app id",
		"var.x":                           "!",
		"services.db":                     "!",
	} {
		r, err := expr.ParseRef(in)
		if err != nil {
			t.Fatal(err)
		}
		id, field, ok := SplitRuntimeRef(r)
		got := "!"
		if ok {
			got = id + " " + expr.PathString(field)
		}
		if got != want {
			t.Errorf("%s: got %q, want %q", in, got, want)
		}
	}
}

// Resolve works on an App built in code (as the engine's tests do), and a
// lone reference keeps the referenced value's type.
func TestResolveHandBuiltApp(t *testing.T) {
	app := &descriptor.App{
		Name:     "demo",
		Payloads: map[string]*descriptor.Payload{"p": {Name: "p", Runtime: "vm", Params: map[string]any{"ports": []any{int64(80), int64(443)}}}},
		Networks: map[string]*descriptor.Network{"net": {Name: "net", IP: "10.0.0.0/24"}},
		Services: map[string]*descriptor.Service{
			"db":  {Name: "db", Payload: "p", Network: "net", Instances: 1},
			"web": {Name: "web", Payload: "p", Network: "net", Instances: 12, DependsOn: []string{"db"}},
			"lb": {Name: "lb", Payload: "p", Network: "net", Instances: 1, Init: []descriptor.Command{{Run: &descriptor.RunCommand{
				Args: []string{"${payloads.p.params.ports}", "${services.web[11].network_node.ip}", "${instance.index}"}}}}},
		},
	}
	r, diags := Resolve(app, Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if got := r.Summary(); got != "3 services, 1 network, 27 edges" {
		t.Errorf("summary = %q", got)
	}
	if r.Instances != 14 {
		t.Errorf("instances = %d", r.Instances)
	}
	var ids []string
	for _, n := range r.Nodes {
		ids = append(ids, n.ID)
	}
	if !strings.HasPrefix(strings.Join(ids, " "), "networks.net services.db services.lb services.web[0] services.web[1] services.web[2]") ||
		ids[len(ids)-1] != "services.web[11]" {
		t.Errorf("node order = %v", ids)
	}
	args := r.Node("services.lb").Spec["init"].([]any)[0].(map[string]any)["run"].(map[string]any)["args"].([]any)
	want := []any{[]any{int64(80), int64(443)}, "${services.web[11].network_node.ip}", 0}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args = %#v", args)
	}
	if deps := r.Graph.DependenciesOf("services.web[3]"); !reflect.DeepEqual(deps, []string{"networks.net", "services.db"}) {
		t.Errorf("web[3] deps = %v", deps)
	}
	if _, err := r.Graph.TopoOrder(); err != nil {
		t.Error(err)
	}
}
