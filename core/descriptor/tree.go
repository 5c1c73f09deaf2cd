package descriptor

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Tree returns the app in canonical form as a generic tree: what `gcompose
// config` prints, and what App.Positions' JSON pointers point into. Top-level
// keys are meta, payloads, networks, services, plugs, resources, secrets, outputs and budget
// (where each value is read from, never the value); empty
// sections are omitted. The tree round-trips: loading it gives the same App.
func (a *App) Tree() map[string]any {
	t := map[string]any{}
	if len(a.Meta) > 0 {
		t["meta"] = a.Meta
	}
	if len(a.Outputs) > 0 {
		t["outputs"] = a.Outputs
	}
	if b := a.Budget; b != nil {
		e := map[string]any{}
		if b.PerHour > 0 {
			e["per_hour"] = b.PerHour
		}
		if b.Total > 0 {
			e["total"] = b.Total
		}
		if len(e) > 0 {
			t["budget"] = e
		}
	}
	if len(a.Payloads) > 0 {
		m := make(map[string]any, len(a.Payloads))
		for name, p := range a.Payloads {
			e := map[string]any{"runtime": p.Runtime}
			putStrings(e, "constraints", p.Constraints)
			putStrings(e, "capabilities", p.Capabilities)
			if len(p.Params) > 0 {
				e["params"] = p.Params
			}
			putString(e, "build", p.BuildDir)
			m[name] = e
		}
		t["payloads"] = m
	}
	if len(a.Networks) > 0 {
		m := make(map[string]any, len(a.Networks))
		for name, n := range a.Networks {
			e := map[string]any{"ip": n.IP}
			putString(e, "owner_ip", n.OwnerIP)
			putString(e, "mask", n.Mask)
			putString(e, "gateway", n.Gateway)
			m[name] = e
		}
		t["networks"] = m
	}
	if len(a.Services) > 0 {
		m := make(map[string]any, len(a.Services))
		for name, s := range a.Services {
			m[name] = s.tree()
		}
		t["services"] = m
	}
	if len(a.Plugs) > 0 {
		m := make(map[string]any, len(a.Plugs))
		for name, p := range a.Plugs {
			e := map[string]any{"path": p.Path, "read_only": p.ReadOnly}
			putStrings(e, "resource_names", p.ResourceNames)
			putStrings(e, "resource_types", p.ResourceTypes)
			m[name] = e
		}
		t["plugs"] = m
	}
	if len(a.Resources) > 0 {
		m := make(map[string]any, len(a.Resources))
		for name, r := range a.Resources {
			e := map[string]any{"type": r.Type}
			if len(r.Dependencies) > 0 {
				deps := make(map[string]any, len(r.Dependencies))
				for k, v := range r.Dependencies {
					deps[k] = v
				}
				e["dependencies"] = deps
			}
			if len(r.Config) > 0 {
				e["config"] = r.Config
			}
			if r.Protect {
				e["protect"] = true
			}
			if r.CreateBeforeDestroy {
				e["create_before_destroy"] = true
			}
			m[name] = e
		}
		t["resources"] = m
	}
	if len(a.Secrets) > 0 {
		m := make(map[string]any, len(a.Secrets))
		for name, s := range a.Secrets {
			e := map[string]any{}
			putString(e, "env", s.Env)
			putString(e, "file", s.File)
			m[name] = e
		}
		t["secrets"] = m
	}
	return t
}

func (s *Service) tree() map[string]any {
	e := map[string]any{"payload": s.Payload, "instances": s.Instances}
	putString(e, "network", s.Network)
	putStrings(e, "ip", s.IP)
	putStrings(e, "depends_on", s.DependsOn)
	if len(s.Init) > 0 {
		cmds := make([]any, len(s.Init))
		for i, c := range s.Init {
			run := map[string]any{}
			if c.Run != nil {
				putString(run, "entry_point", c.Run.EntryPoint)
				args := make([]any, len(c.Run.Args))
				for j, a := range c.Run.Args {
					args[j] = a
				}
				run["args"] = args
			}
			cmds[i] = map[string]any{"run": run}
		}
		e["init"] = cmds
	}
	if s.HTTPProxy != nil {
		e["http_proxy"] = s.HTTPProxy.tree()
	}
	if s.TCPProxy != nil {
		e["tcp_proxy"] = s.TCPProxy.tree()
	}
	if s.Protect {
		e["protect"] = true
	}
	return e
}

func (p *Proxy) tree() map[string]any {
	ports := make([]any, len(p.Ports))
	for i, pm := range p.Ports {
		ports[i] = pm.String()
	}
	return map[string]any{"ports": ports}
}

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func putStrings(m map[string]any, k string, v []string) {
	if len(v) == 0 {
		return
	}
	l := make([]any, len(v))
	for i, s := range v {
		l[i] = s
	}
	m[k] = l
}

// MarshalYAML prints the app in canonical form (see Tree).
func (a *App) MarshalYAML() (any, error) { return a.Tree(), nil }

// Canonical prints the app's canonical form as YAML with sorted keys: the
// same bytes whatever dialect, shorthands or file split it was written in.
func Canonical(app *App) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(toNode(app.Tree())); err != nil {
		return nil, fmt.Errorf("printing canonical descriptor of %s: %w", app.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("printing canonical descriptor of %s: %w", app.Name, err)
	}
	return buf.Bytes(), nil
}

// toNode builds the YAML for a generic tree with sorted keys, quoting strings
// a YAML 1.1 reader (dapp-runner's PyYAML) would take for numbers, such as
// port mappings "8080:80".
func toNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, toNode(k), toNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if len(v) == 0 {
			n.Style = yaml.FlowStyle
		}
		for _, it := range v {
			n.Content = append(n.Content, toNode(it))
		}
		return n
	case string:
		n := &yaml.Node{}
		n.SetString(v)
		if n.Style == 0 && looksNumeric(v) {
			n.Style = yaml.DoubleQuotedStyle
		}
		return n
	default:
		var n yaml.Node
		if err := n.Encode(v); err != nil {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
		}
		return &n
	}
}

func looksNumeric(s string) bool {
	if !strings.Contains(s, ":") {
		return false // plain numbers are quoted by the encoder already
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r == ':' || r == '.' || r == '_' || r == '-' || r == '+') {
			return false
		}
	}
	return true
}
