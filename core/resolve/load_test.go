package resolve

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/source"
)

// loadTestApp is a stand-in for the descriptor loader (being written in
// parallel): it reads one GAP-16-style YAML file into a descriptor.App with
// Positions keyed by JSON pointer, enough for resolve's tests. It does no
// validation, merging or dialects.
func loadTestApp(t testing.TB, path string) *descriptor.App {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	app := &descriptor.App{Files: []string{path}, Positions: map[string]source.Pos{}}
	tree, _ := plainTree(&doc, "", path, app.Positions).(map[string]any)
	app.Name = strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], ".yaml")
	if meta, ok := tree["meta"].(map[string]any); ok {
		app.Meta = meta
		if n, ok := meta["name"].(string); ok {
			app.Name = n
		}
	}
	pos := func(tokens ...string) source.Pos { return app.Pos(pointer(tokens...)) }
	if m, ok := tree["payloads"].(map[string]any); ok {
		app.Payloads = map[string]*descriptor.Payload{}
		for name, v := range m {
			e, _ := v.(map[string]any)
			params, _ := e["params"].(map[string]any)
			app.Payloads[name] = &descriptor.Payload{Name: name, Runtime: str(e["runtime"]), Constraints: strs(e["constraints"]),
				Capabilities: strs(e["capabilities"]), Params: params, Pos: pos("payloads", name)}
		}
	}
	if m, ok := tree["networks"].(map[string]any); ok {
		app.Networks = map[string]*descriptor.Network{}
		for name, v := range m {
			e, _ := v.(map[string]any)
			app.Networks[name] = &descriptor.Network{Name: name, IP: str(e["ip"]), OwnerIP: str(e["owner_ip"]),
				Mask: str(e["mask"]), Gateway: str(e["gateway"]), Pos: pos("networks", name)}
		}
	}
	if m, ok := tree["services"].(map[string]any); ok {
		app.Services = map[string]*descriptor.Service{}
		for name, v := range m {
			e, _ := v.(map[string]any)
			s := &descriptor.Service{Name: name, Payload: str(e["payload"]), Network: str(e["network"]), IP: strs(e["ip"]),
				DependsOn: strs(e["depends_on"]), Instances: 1, Pos: pos("services", name)}
			if n, ok := e["instances"].(int64); ok {
				s.Instances = int(n)
			}
			init, _ := e["init"].([]any)
			for _, c := range init {
				cm, _ := c.(map[string]any)
				run, _ := cm["run"].(map[string]any)
				s.Init = append(s.Init, descriptor.Command{Run: &descriptor.RunCommand{EntryPoint: str(run["entrypoint"]), Args: strs(run["args"])}})
			}
			app.Services[name] = s
		}
	}
	if m, ok := tree["resources"].(map[string]any); ok {
		app.Resources = map[string]*descriptor.Resource{}
		for name, v := range m {
			e, _ := v.(map[string]any)
			r := &descriptor.Resource{Name: name, Type: str(e["type"]), Pos: pos("resources", name)}
			r.Config, _ = e["config"].(map[string]any)
			if d, ok := e["dependencies"].(map[string]any); ok {
				r.Dependencies = map[string]string{}
				for k, v := range d {
					r.Dependencies[k] = str(v)
				}
			}
			app.Resources[name] = r
		}
	}
	return app
}

func plainTree(n *yaml.Node, ptr, file string, pos map[string]source.Pos) any {
	switch n.Kind {
	case yaml.DocumentNode:
		return plainTree(n.Content[0], ptr, file, pos)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := ptr + "/" + expr.EscapePointer(k.Value)
			pos[p] = source.Pos{File: file, Line: k.Line, Col: k.Column}
			m[k.Value] = plainTree(v, p, file, pos)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			p := ptr + "/" + strconv.Itoa(i)
			pos[p] = source.Pos{File: file, Line: c.Line, Col: c.Column}
			l[i] = plainTree(c, p, file, pos)
		}
		return l
	default:
		if n.Kind == yaml.ScalarNode && ptr != "" {
			pos[ptr] = source.Pos{File: file, Line: n.Line, Col: n.Column} // the value itself
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return n.Value
		}
		if i, ok := v.(int); ok {
			return int64(i)
		}
		return v
	}
}

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func strs(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, e := range l {
		out = append(out, str(e))
	}
	return out
}
