package descriptor

import (
	"errors"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// DefaultNetworkIP is the address of a network that does not give one, and of
// the network dapp-runner creates for a proxied service that names none.
const DefaultNetworkIP = "192.168.0.0/24"

// DefaultNetworkName names the network created for proxied services when the
// descriptor defines none (dapp-runner's behaviour).
const DefaultNetworkName = "default"

// normalizer builds an App from a merged, schema-valid tree, recording where
// each canonical value was written.
type normalizer struct {
	app   *App
	diags source.Diagnostics
}

func (n *normalizer) rec(ptr string, v *value) {
	if v != nil {
		n.app.Positions[ptr] = v.at()
	}
}

// recTree records positions for a free-form subtree (meta, params, config).
func (n *normalizer) recTree(ptr string, v *value) {
	n.rec(ptr, v)
	switch v.kind {
	case kindMap:
		for _, k := range v.keys {
			n.recTree(ptr+"/"+pointerEscape(k), v.m[k])
		}
	case kindSeq:
		for i, it := range v.items {
			n.recTree(ptr+"/"+strconv.Itoa(i), it)
		}
	}
}

func normalize(tree *value, files []string, firstSource string) (*App, source.Diagnostics) {
	n := &normalizer{app: &App{
		Meta:      map[string]any{},
		Payloads:  map[string]*Payload{},
		Networks:  map[string]*Network{},
		Services:  map[string]*Service{},
		Plugs:     map[string]*Plug{},
		Resources: map[string]*Resource{},
		Secrets:   map[string]*Secret{},
		Files:     files,
		Positions: make(map[string]source.Pos, tree.count()),
	}}
	app := n.app
	n.rec("", tree)
	for _, section := range []string{"meta", "payloads", "networks", "nodes", "services", "plugs", "resources", "secrets", "outputs", "budget"} {
		if v := tree.get(section); v != nil {
			n.rec("/"+strings.Replace(section, "nodes", "services", 1), v)
		}
	}
	if meta := tree.get("meta"); meta != nil && meta.kind == kindMap {
		app.Meta, _ = meta.plain().(map[string]any)
		n.recTree("/meta", meta)
	}
	if name, ok := app.Meta["name"].(string); ok {
		app.Name = sanitizeName(name)
	}
	if app.Name == "" {
		app.Name = nameFromFile(firstSource)
	}
	if app.Name == "" {
		app.Name = "app"
	}
	n.payloads(tree.get("payloads"))
	n.networks(tree.get("networks"))
	n.services(tree.get("services"))
	n.services(tree.get("nodes"))
	n.plugs(tree.get("plugs"))
	n.resources(tree.get("resources"))
	n.secrets(tree.get("secrets"))
	if outs := tree.get("outputs"); outs != nil && outs.kind == kindMap {
		app.Outputs, _ = outs.plain().(map[string]any)
		n.recTree("/outputs", outs)
	}
	n.budget(tree.get("budget"))
	n.implicitNetwork(tree.get("networks"))
	return app, n.diags
}

// budget reads budget: (the schema has checked its keys and that each is a
// number or decimal string above 0; what it cannot see, a number past
// float64, is said the same way).
func (n *normalizer) budget(v *value) {
	if v == nil || v.kind != kindMap {
		return
	}
	b := &Budget{Pos: v.at()}
	for key, dst := range map[string]*float64{"per_hour": &b.PerHour, "total": &b.Total} {
		x := v.get(key)
		if x == nil {
			continue
		}
		n.rec("/budget/"+key, x)
		f, err := strconv.ParseFloat(strings.TrimSpace(scalarString(x.scalar)), 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && f > 0:
			n.diags.Errorf(x.at(), "budget.%s: %s is more than gcompose can count (at most %g); leave the key out for no limit", key, describeValue(x), math.MaxFloat64)
			continue
		case err != nil || !(f > 0) || math.IsInf(f, 0):
			n.diags.Errorf(x.at(), "budget.%s: %s %s", key, describeValue(x), budgetAmountMessage)
			continue
		}
		*dst = f
	}
	n.app.Budget = b
}

func entries(section *value) []string {
	if section == nil || section.kind != kindMap {
		return nil
	}
	return section.keys
}

func strOf(v *value) string {
	if v == nil {
		return ""
	}
	return scalarString(v.scalar)
}

func (n *normalizer) strings(ptr string, v *value) []string {
	if v == nil || v.kind != kindSeq {
		return nil
	}
	out := make([]string, len(v.items))
	for i, it := range v.items {
		out[i] = strOf(it)
		n.rec(ptr+"/"+strconv.Itoa(i), it)
	}
	return out
}

func (n *normalizer) payloads(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		ptr := "/payloads/" + pointerEscape(name)
		p := &Payload{Name: name, Runtime: strOf(v.get("runtime")), Pos: v.at()}
		n.rec(ptr, v)
		n.rec(ptr+"/runtime", v.get("runtime"))
		p.Constraints = n.strings(ptr+"/constraints", v.get("constraints"))
		n.rec(ptr+"/constraints", v.get("constraints"))
		p.Capabilities = n.strings(ptr+"/capabilities", v.get("capabilities"))
		n.rec(ptr+"/capabilities", v.get("capabilities"))
		if params := v.get("params"); params != nil && params.kind == kindMap {
			p.Params, _ = params.plain().(map[string]any)
			n.recTree(ptr+"/params", params)
		}
		if b := v.get("build"); b != nil {
			p.Build = strOf(b)
			n.rec(ptr+"/build", b)
			p.BuildDir = buildDir(b.at().File, p.Build)
		}
		n.app.Payloads[name] = p
	}
}

func (n *normalizer) networks(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		ptr := "/networks/" + pointerEscape(name)
		nw := &Network{Name: name, IP: strOf(v.get("ip")), OwnerIP: strOf(v.get("owner_ip")),
			Mask: strOf(v.get("mask")), Gateway: strOf(v.get("gateway")), Pos: v.at()}
		n.rec(ptr, v)
		for _, k := range []string{"ip", "owner_ip", "mask", "gateway"} {
			n.rec(ptr+"/"+k, v.get(k))
		}
		if nw.IP == "" {
			nw.IP = DefaultNetworkIP
			n.app.Positions[ptr+"/ip"] = nw.Pos
		}
		n.app.Networks[name] = nw
	}
}

func (n *normalizer) services(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		if prev, dup := n.app.Services[name]; dup {
			n.diags.Errorf(v.keyPos, "service %q is defined both under services and nodes (other at %s)", name, prev.Pos)
			continue
		}
		ptr := "/services/" + pointerEscape(name)
		s := &Service{Name: name, Payload: strOf(v.get("payload")), Network: strOf(v.get("network")),
			Instances: 1, Pos: v.at()}
		n.rec(ptr, v)
		n.rec(ptr+"/payload", v.get("payload"))
		n.rec(ptr+"/network", v.get("network"))
		if ip := v.get("ip"); ip != nil {
			n.rec(ptr+"/ip", ip)
			if ip.kind == kindSeq {
				s.IP = n.strings(ptr+"/ip", ip)
			} else if ip.kind == kindScalar {
				s.IP = []string{strOf(ip)}
				n.rec(ptr+"/ip/0", ip)
			}
		}
		s.DependsOn = n.strings(ptr+"/depends_on", v.get("depends_on"))
		n.rec(ptr+"/depends_on", v.get("depends_on"))
		if inst := v.get("instances"); inst != nil {
			switch i := inst.scalar.(type) {
			case int64:
				s.Instances = int(min(max(i, 0), 1<<20))
			case float64: // 2.0 is an integer to JSON Schema
				s.Instances = int(min(max(i, 0), 1<<20))
			}
			n.rec(ptr+"/instances", inst)
		}
		s.Init = n.init(ptr+"/init", v.get("init"))
		if ep := v.get("entrypoint"); ep != nil {
			// dapp-runner's deprecated entrypoint: argv lists, run in order.
			if v.get("init") != nil {
				n.diags.Errorf(ep.keyPos, "service %s: entrypoint (deprecated) and init both given; use init only", name)
			} else {
				n.diags.Warnf(ep.keyPos, "service %s: entrypoint is deprecated; write init instead", name)
				s.Init = n.init(ptr+"/init", ep)
			}
		}
		s.HTTPProxy = n.proxy(ptr+"/http_proxy", v.get("http_proxy"))
		s.TCPProxy = n.proxy(ptr+"/tcp_proxy", v.get("tcp_proxy"))
		s.Protect = n.flag(ptr+"/protect", v.get("protect"))
		n.app.Services[name] = s
	}
}

// init normalizes every init shorthand to Commands: a bare argv list is one
// command; each item is an argv list, run: [argv] or run: {entry_point, args}.
func (n *normalizer) init(ptr string, v *value) []Command {
	if v == nil || v.kind != kindSeq {
		return nil
	}
	n.rec(ptr, v)
	bare := false // a list holding a string is one argv list (the schema made them all strings)
	for _, it := range v.items {
		bare = bare || it.kind == kindScalar
	}
	if bare {
		n.rec(ptr+"/0", v)
		n.rec(ptr+"/0/run", v)
		n.rec(ptr+"/0/run/args", v)
		return []Command{{Run: &RunCommand{Args: n.strings(ptr+"/0/run/args", v)}}}
	}
	cmds := make([]Command, 0, len(v.items))
	for i, it := range v.items {
		cptr := ptr + "/" + strconv.Itoa(i)
		n.rec(cptr, it)
		run := &RunCommand{}
		switch {
		case it.kind == kindSeq:
			n.rec(cptr+"/run", it)
			run.Args = n.strings(cptr+"/run/args", it)
			n.rec(cptr+"/run/args", it)
		case it.get("run") != nil && it.get("run").kind == kindSeq:
			r := it.get("run")
			n.rec(cptr+"/run", r)
			run.Args = n.strings(cptr+"/run/args", r)
			n.rec(cptr+"/run/args", r)
		case it.get("run") != nil:
			r := it.get("run")
			n.rec(cptr+"/run", r)
			run.EntryPoint = strOf(r.get("entry_point"))
			n.rec(cptr+"/run/entry_point", r.get("entry_point"))
			run.Args = n.strings(cptr+"/run/args", r.get("args"))
			n.rec(cptr+"/run/args", r)
			n.rec(cptr+"/run/args", r.get("args"))
		}
		cmds = append(cmds, Command{Run: run})
	}
	return cmds
}

func (n *normalizer) proxy(ptr string, v *value) *Proxy {
	if v == nil || v.kind != kindMap {
		return nil
	}
	n.rec(ptr, v)
	p := &Proxy{}
	ports := v.get("ports")
	n.rec(ptr+"/ports", ports)
	if ports == nil {
		return p
	}
	for i, it := range ports.items {
		pptr := ptr + "/ports/" + strconv.Itoa(i)
		n.rec(pptr, it)
		pm, msg := ParsePortMapping(strOf(it))
		if msg != "" {
			n.diags.Errorf(it.at(), "port %s %s", it.text(), msg)
			continue
		}
		p.Ports = append(p.Ports, pm)
	}
	return p
}

// ParsePortMapping parses "80" (remote port, local picked at runtime) or
// "8080:80" (local:remote). The message says what is wrong, or is "".
func ParsePortMapping(s string) (PortMapping, string) {
	local, remote, hasLocal := strings.Cut(strings.TrimSpace(s), ":")
	if !hasLocal {
		local, remote = "", local
	}
	r, msg := parsePort(remote)
	if msg != "" {
		return PortMapping{}, msg
	}
	pm := PortMapping{Remote: r}
	if hasLocal {
		l, msg := parsePort(local)
		if msg != "" {
			return PortMapping{}, msg
		}
		pm.Local = l
	}
	return pm, ""
}

func parsePort(s string) (int, string) {
	p, err := strconv.Atoi(s)
	if err != nil || strings.HasPrefix(s, "+") {
		return 0, `is not "PORT" or "LOCAL:REMOTE" (e.g. "80" or "8080:80")`
	}
	if p < 1 || p > 65535 {
		return 0, "is out of range: ports are 1 to 65535"
	}
	return p, ""
}

// String renders a mapping the way descriptors write it.
func (p PortMapping) String() string {
	if p.Local == 0 {
		return strconv.Itoa(p.Remote)
	}
	return strconv.Itoa(p.Local) + ":" + strconv.Itoa(p.Remote)
}

func (n *normalizer) plugs(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		ptr := "/plugs/" + pointerEscape(name)
		p := &Plug{Name: name, Path: strOf(v.get("path")), Pos: v.at()}
		if ro := v.get("read_only"); ro != nil {
			p.ReadOnly, _ = ro.scalar.(bool)
		}
		n.rec(ptr, v)
		n.rec(ptr+"/path", v.get("path"))
		n.rec(ptr+"/read_only", v.get("read_only"))
		p.ResourceNames = n.strings(ptr+"/resource_names", v.get("resource_names"))
		n.rec(ptr+"/resource_names", v.get("resource_names"))
		p.ResourceTypes = n.strings(ptr+"/resource_types", v.get("resource_types"))
		n.rec(ptr+"/resource_types", v.get("resource_types"))
		n.app.Plugs[name] = p
	}
}

func (n *normalizer) resources(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		ptr := "/resources/" + pointerEscape(name)
		r := &Resource{Name: name, Type: strOf(v.get("type")), Pos: v.at()}
		n.rec(ptr, v)
		n.rec(ptr+"/type", v.get("type"))
		if deps := v.get("dependencies"); deps != nil && deps.kind == kindMap {
			r.Dependencies = make(map[string]string, len(deps.keys))
			n.rec(ptr+"/dependencies", deps)
			for _, alias := range deps.keys {
				r.Dependencies[alias] = strOf(deps.m[alias])
				n.rec(ptr+"/dependencies/"+pointerEscape(alias), deps.m[alias])
			}
		}
		if cfg := v.get("config"); cfg != nil && cfg.kind == kindMap {
			r.Config, _ = cfg.plain().(map[string]any)
			n.recTree(ptr+"/config", cfg)
		}
		r.Protect = n.flag(ptr+"/protect", v.get("protect"))
		r.CreateBeforeDestroy = n.flag(ptr+"/create_before_destroy", v.get("create_before_destroy"))
		n.app.Resources[name] = r
	}
}

// implicitNetwork does what dapp-runner does for a proxied service that names
// no network: it joins the first network, created as "default" if there is
// none (a proxy reaches its service through the network).
func (n *normalizer) implicitNetwork(section *value) {
	var first string
	if keys := entries(section); len(keys) > 0 {
		first = keys[0]
	}
	for _, name := range slices.Sorted(maps.Keys(n.app.Services)) {
		s := n.app.Services[name]
		if s.Network != "" || (s.HTTPProxy == nil && s.TCPProxy == nil) {
			continue
		}
		if first == "" {
			first = DefaultNetworkName
			n.app.Networks[first] = &Network{Name: first, IP: DefaultNetworkIP, Pos: s.Pos}
			if _, ok := n.app.Positions["/networks"]; !ok {
				n.app.Positions["/networks"] = s.Pos
			}
			n.app.Positions["/networks/"+first] = s.Pos
			n.app.Positions["/networks/"+first+"/ip"] = s.Pos
		}
		s.Network = first
		n.app.Positions["/services/"+pointerEscape(s.Name)+"/network"] = s.Pos
	}
}

func (n *normalizer) secrets(section *value) {
	for _, name := range entries(section) {
		v := section.m[name]
		ptr := "/secrets/" + pointerEscape(name)
		n.rec(ptr, v)
		n.rec(ptr+"/env", v.get("env"))
		n.rec(ptr+"/file", v.get("file"))
		n.app.Secrets[name] = &Secret{Name: name, Env: strOf(v.get("env")), File: strOf(v.get("file")), Pos: v.at()}
	}
}

// flag reads a boolean (the schema has checked its type).
func (n *normalizer) flag(ptr string, v *value) bool {
	if v == nil {
		return false
	}
	n.rec(ptr, v)
	b, _ := v.scalar.(bool)
	return b
}

// buildDir is the directory a build: names: an absolute path as written, a
// relative one from the folder of the descriptor file that wrote it (as
// Docker Compose reads build:).
func buildDir(file, build string) string {
	if build == "" || filepath.IsAbs(build) {
		return filepath.Clean(build)
	}
	dir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return filepath.Join(filepath.Dir(file), build)
	}
	return filepath.Join(dir, build)
}
