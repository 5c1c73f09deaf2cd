package resolve

import (
	"strconv"

	"github.com/gcompose/gcompose/core/descriptor"
)

// appTree returns the canonical generic tree of app: App.Tree() when the
// descriptor package provides it, else one built here from the typed model
// (same keys: those of the GAP-16 descriptor, init as run.args).
func appTree(app *descriptor.App) map[string]any {
	if t, ok := any(app).(interface{ Tree() map[string]any }); ok {
		return t.Tree()
	}
	return treeFromModel(app)
}

func treeFromModel(app *descriptor.App) map[string]any {
	t := map[string]any{}
	if len(app.Meta) > 0 {
		t["meta"] = app.Meta
	}
	if len(app.Payloads) > 0 {
		m := map[string]any{}
		for name, p := range app.Payloads {
			e := map[string]any{}
			putString(e, "runtime", p.Runtime)
			putList(e, "constraints", p.Constraints)
			putList(e, "capabilities", p.Capabilities)
			if len(p.Params) > 0 {
				e["params"] = p.Params
			}
			m[name] = e
		}
		t["payloads"] = m
	}
	if len(app.Networks) > 0 {
		m := map[string]any{}
		for name, n := range app.Networks {
			e := map[string]any{}
			putString(e, "ip", n.IP)
			putString(e, "owner_ip", n.OwnerIP)
			putString(e, "mask", n.Mask)
			putString(e, "gateway", n.Gateway)
			m[name] = e
		}
		t["networks"] = m
	}
	if len(app.Services) > 0 {
		m := map[string]any{}
		for name, s := range app.Services {
			e := map[string]any{}
			putString(e, "payload", s.Payload)
			putString(e, "network", s.Network)
			putList(e, "ip", s.IP)
			putList(e, "depends_on", s.DependsOn)
			if len(s.Init) > 0 {
				init := make([]any, 0, len(s.Init))
				for _, c := range s.Init {
					run := map[string]any{}
					if c.Run != nil {
						putString(run, "entrypoint", c.Run.EntryPoint)
						run["args"] = toList(c.Run.Args)
					}
					init = append(init, map[string]any{"run": run})
				}
				e["init"] = init
			}
			if s.Instances > 1 {
				e["instances"] = int64(s.Instances)
			}
			putProxy(e, "http_proxy", s.HTTPProxy)
			putProxy(e, "tcp_proxy", s.TCPProxy)
			m[name] = e
		}
		t["services"] = m
	}
	if len(app.Resources) > 0 {
		m := map[string]any{}
		for name, r := range app.Resources {
			e := map[string]any{}
			putString(e, "type", r.Type)
			if len(r.Dependencies) > 0 {
				d := map[string]any{}
				for k, v := range r.Dependencies {
					d[k] = v
				}
				e["dependencies"] = d
			}
			if len(r.Config) > 0 {
				e["config"] = r.Config
			}
			m[name] = e
		}
		t["resources"] = m
	}
	return t
}

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func putList(m map[string]any, k string, v []string) {
	if len(v) > 0 {
		m[k] = toList(v)
	}
}

func toList(v []string) []any {
	l := make([]any, len(v))
	for i, s := range v {
		l[i] = s
	}
	return l
}

func putProxy(m map[string]any, k string, p *descriptor.Proxy) {
	if p == nil {
		return
	}
	ports := make([]any, len(p.Ports))
	for i, pm := range p.Ports {
		if pm.Local != 0 {
			ports[i] = strconv.Itoa(pm.Local) + ":" + strconv.Itoa(pm.Remote)
		} else {
			ports[i] = strconv.Itoa(pm.Remote)
		}
	}
	m[k] = map[string]any{"ports": ports}
}
