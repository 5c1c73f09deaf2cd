package descriptor

import (
	"errors"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/source"
)

// checkApp runs the checks the schema cannot express, each reported where
// the offending value is written.
func checkApp(a *App) source.Diagnostics {
	var ds source.Diagnostics
	checkNames(a, &ds)
	checkAdapterNames(a, &ds)
	checkBuilds(a, &ds)
	nets := checkNetworks(a, &ds)
	checkServices(a, nets, &ds)
	checkPlugs(a, &ds)
	checkResources(a, &ds)
	checkSecrets(a, &ds)
	return ds
}

func checkNames(a *App, ds *source.Diagnostics) {
	sections := []struct {
		what, section string
		names         []string
	}{
		{"payload", "payloads", slices.Sorted(maps.Keys(a.Payloads))},
		{"network", "networks", slices.Sorted(maps.Keys(a.Networks))},
		{"service", "services", slices.Sorted(maps.Keys(a.Services))},
		{"resource", "resources", slices.Sorted(maps.Keys(a.Resources))},
	}
	for _, s := range sections {
		for _, name := range s.names {
			if why := checkDNSLabel(name); why != "" {
				ds.Errorf(a.Pos(pointer(s.section, name)), "%s name %q %s; names are DNS labels: lower-case letters, digits and hyphens, at most 63", s.what, name, why)
			}
		}
	}
}

// netInfo is a checked network: its prefix and the addresses taken in it.
type netInfo struct {
	prefix netip.Prefix
	taken  map[netip.Addr]holder // address -> what holds it, for messages
}

func checkNetworks(a *App, ds *source.Diagnostics) map[string]*netInfo {
	nets := map[string]*netInfo{}
	for _, name := range slices.Sorted(maps.Keys(a.Networks)) {
		n := a.Networks[name]
		base := pointer("networks", name)
		prefix, ok := parseNetwork(n, a.Pos(base+"/ip"), a.Pos(base+"/mask"), ds)
		if !ok {
			continue
		}
		info := &netInfo{prefix: prefix, taken: map[netip.Addr]holder{}}
		nets[name] = info
		for _, f := range []struct{ key, val string }{{"owner_ip", n.OwnerIP}, {"gateway", n.Gateway}} {
			if f.val == "" {
				continue
			}
			at := a.Pos(base + "/" + f.key)
			addr, ok := hostAddr(f.val, prefix, at, f.key, ds)
			if !ok {
				continue
			}
			if prev, dup := info.taken[addr]; dup {
				ds.Errorf(at, "%s %s is already used by %s", f.key, addr, prev)
				continue
			}
			info.taken[addr] = holder{what: "network " + name + " " + f.key}
		}
	}
	return nets
}

// holder says what holds an address or port, rendered only on a conflict.
type holder struct {
	what string
	at   source.Pos
}

func (h holder) String() string {
	if !h.at.IsValid() {
		return h.what
	}
	return h.what + " (" + h.at.String() + ")"
}

// parseNetwork reads a network's ip: CIDR, host/prefix, or an address with mask.
func parseNetwork(n *Network, ipAt, maskAt source.Pos, ds *source.Diagnostics) (netip.Prefix, bool) {
	var maskBits = -1
	if n.Mask != "" {
		m, err := netip.ParseAddr(n.Mask)
		bits, ok := maskLen(m)
		if err != nil || !m.Is4() || !ok {
			ds.Errorf(maskAt, "mask %q is not an IPv4 network mask (e.g. 255.255.255.0)", n.Mask)
			return netip.Prefix{}, false
		}
		maskBits = bits
	}
	p, err := netip.ParsePrefix(n.IP)
	if err != nil {
		addr, aerr := netip.ParseAddr(n.IP)
		if aerr != nil || maskBits < 0 {
			ds.Errorf(ipAt, "network ip %q is not an IPv4 network: write it as CIDR (192.168.0.0/24), host/prefix (192.168.0.1/24) or an address with mask", n.IP)
			return netip.Prefix{}, false
		}
		p = netip.PrefixFrom(addr, maskBits)
	} else if maskBits >= 0 && maskBits != p.Bits() {
		ds.Errorf(maskAt, "mask %s (/%d) disagrees with the prefix of ip %s", n.Mask, maskBits, n.IP)
		return netip.Prefix{}, false
	}
	if !p.Addr().Is4() {
		ds.Errorf(ipAt, "network ip %q is not IPv4; Golem networks are IPv4", n.IP)
		return netip.Prefix{}, false
	}
	if p.Bits() > 30 {
		ds.Errorf(ipAt, "network %s is too small: a /%d leaves no room for services (at most /30)", n.IP, p.Bits())
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}

func maskLen(m netip.Addr) (int, bool) {
	if !m.Is4() {
		return 0, false
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	bits := 0
	for v&(1<<31) != 0 {
		bits++
		v <<= 1
	}
	return bits, v == 0
}

// hostAddr parses an address that must be a usable host address in prefix.
func hostAddr(s string, prefix netip.Prefix, at source.Pos, what string, ds *source.Diagnostics) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil || !addr.Is4() {
		ds.Errorf(at, "%s %q is not an IPv4 address", what, s)
		return netip.Addr{}, false
	}
	if !prefix.Contains(addr) {
		ds.Errorf(at, "%s %s is outside its network %s", what, addr, prefix)
		return netip.Addr{}, false
	}
	if addr == prefix.Addr() {
		ds.Errorf(at, "%s %s is the network address of %s, not a host address", what, addr, prefix)
		return netip.Addr{}, false
	}
	if addr == broadcast(prefix) {
		ds.Errorf(at, "%s %s is the broadcast address of %s, not a host address", what, addr, prefix)
		return netip.Addr{}, false
	}
	return addr, true
}

func broadcast(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= (1 << (32 - p.Bits())) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func checkServices(a *App, nets map[string]*netInfo, ds *source.Diagnostics) {
	localPorts := map[int]holder{}
	for _, name := range slices.Sorted(maps.Keys(a.Services)) {
		s := a.Services[name]
		base := pointer("services", name)
		if _, ok := a.Payloads[s.Payload]; !ok {
			ds.Errorf(a.Pos(base+"/payload"), "service %s: payload %q is not defined%s", name, s.Payload, source.Suggest(s.Payload, slices.Sorted(maps.Keys(a.Payloads))))
		}
		if s.Network != "" {
			if _, ok := a.Networks[s.Network]; !ok {
				ds.Errorf(a.Pos(base+"/network"), "service %s: network %q is not defined%s", name, s.Network, source.Suggest(s.Network, slices.Sorted(maps.Keys(a.Networks))))
			}
		}
		if s.Instances < 1 {
			ds.Errorf(a.Pos(base+"/instances"), "service %s: instances must be at least 1, got %d", name, s.Instances)
		}
		if len(s.IP) > 0 {
			checkServiceIPs(a, s, base, nets, ds)
		}
		for _, px := range []struct {
			key string
			p   *Proxy
		}{{"http_proxy", s.HTTPProxy}, {"tcp_proxy", s.TCPProxy}} {
			if px.p == nil {
				continue
			}
			for i, pm := range px.p.Ports {
				if pm.Local == 0 {
					continue
				}
				at := a.Pos(base + "/" + px.key + "/ports/" + strconv.Itoa(i))
				if prev, dup := localPorts[pm.Local]; dup {
					ds.Errorf(at, "local port %d is already used by %s", pm.Local, prev)
					continue
				}
				localPorts[pm.Local] = holder{what: "service " + name, at: at}
			}
		}
	}
}

func checkServiceIPs(a *App, s *Service, base string, nets map[string]*netInfo, ds *source.Diagnostics) {
	if s.Network == "" {
		ds.Errorf(a.Pos(base+"/ip"), "service %s: ip is given but the service joins no network", s.Name)
		return
	}
	if len(s.IP) > s.Instances {
		ds.Errorf(a.Pos(base+"/ip"), "service %s: %d addresses for %d instance(s); give at most one per instance", s.Name, len(s.IP), s.Instances)
	}
	info := nets[s.Network]
	if info == nil {
		return // undefined or invalid network, reported already
	}
	for i, ip := range s.IP {
		at := a.Pos(base + "/ip/" + strconv.Itoa(i))
		addr, ok := hostAddr(ip, info.prefix, at, "ip", ds)
		if !ok {
			continue
		}
		if prev, dup := info.taken[addr]; dup {
			ds.Errorf(at, "ip %s is already used in network %s by %s", addr, s.Network, prev)
			continue
		}
		info.taken[addr] = holder{what: "service " + s.Name, at: at}
	}
}

func checkPlugs(a *App, ds *source.Diagnostics) {
	for _, name := range slices.Sorted(maps.Keys(a.Plugs)) {
		p := a.Plugs[name]
		base := pointer("plugs", name)
		if p.Path == "" {
			ds.Errorf(a.Pos(base+"/path"), "plug %s: path is empty", name)
		}
		for key, list := range map[string][]string{"resource_names": p.ResourceNames, "resource_types": p.ResourceTypes} {
			for i, re := range list {
				if _, err := regexp.Compile(re); err != nil {
					ds.Errorf(a.Pos(base+"/"+key+"/"+strconv.Itoa(i)), "plug %s: %s: invalid regular expression: %v", name, key, err)
				} else if sec := addressPrefix(re); key == "resource_names" && sec != "" {
					// Earlier gcompose matched the address; a pattern
					// written for it would now silently match nothing.
					ds.Errorf(a.Pos(base+"/"+key+"/"+strconv.Itoa(i)), "plug %s: resource_names %q: patterns match the name as written under %s (db, not %s.db), as in Deployster: drop %q", name, re, sec, sec, sec+".")
				}
			}
		}
	}
}

// addressPrefix is the section a resource_names pattern starts with when
// it was written for an address (^resources\.db), "" otherwise.
func addressPrefix(re string) string {
	re = strings.TrimPrefix(re, "^")
	for _, sec := range []string{"resources", "services", "networks"} {
		if strings.HasPrefix(re, sec+`\.`) || strings.HasPrefix(re, sec+".") {
			return sec
		}
	}
	return ""
}

// checkAdapterNames refuses two services whose instances would reach their
// adapter under one name: web with 2 instances is web-0 and web-1, which a
// service named web-1 would be as well.
func checkAdapterNames(a *App, ds *source.Diagnostics) {
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(a.Services)) {
		n := max(a.Services[name].Instances, 1)
		for i := 0; i < n; i++ {
			addr := address.Service(name, i, n)
			an := address.AdapterName(addr)
			if other, ok := seen[an]; ok {
				ds.Errorf(a.Pos(pointer("services", name)), "service %s: %s and %s would both reach their adapter named %q (an instance i of a service is NAME-i): rename one", name, other, addr, an)
				continue
			}
			seen[an] = addr
		}
	}
}

func checkResources(a *App, ds *source.Diagnostics) {
	for _, name := range slices.Sorted(maps.Keys(a.Resources)) {
		r := a.Resources[name]
		base := pointer("resources", name)
		if why := checkImageRef(r.Type); why != "" {
			ds.Errorf(a.Pos(base+"/type"), "resource %s: type %q is not an image reference: it %s", name, r.Type, why)
		}
		for _, alias := range slices.Sorted(maps.Keys(r.Dependencies)) {
			dep := r.Dependencies[alias]
			at := a.Pos(base + "/dependencies/" + pointerEscape(alias))
			if _, ok := a.Resources[dep]; !ok {
				ds.Errorf(at, "resource %s: dependency %s names resource %q, which is not defined%s", name, alias, dep, source.Suggest(dep, slices.Sorted(maps.Keys(a.Resources))))
			} else if dep == name {
				ds.Errorf(at, "resource %s depends on itself", name)
			}
		}
	}
}

func checkSecrets(a *App, ds *source.Diagnostics) {
	for _, name := range slices.Sorted(maps.Keys(a.Secrets)) {
		s := a.Secrets[name]
		base := pointer("secrets", name)
		if !secretName.MatchString(name) {
			ds.Errorf(a.Pos(base), "secret name %q: use letters, digits, _ and -, starting with a letter or _", name)
		}
		if (s.Env == "") == (s.File == "") {
			ds.Errorf(a.Pos(base), "secret %s: give exactly one of env: VARIABLE or file: PATH", name)
		}
	}
}

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// checkBuilds reports, where build: is written, a build context that is not
// a directory holding a Dockerfile, and a build: beside params that name
// another image (the built image is the payload's image).
func checkBuilds(a *App, ds *source.Diagnostics) {
	for _, name := range slices.Sorted(maps.Keys(a.Payloads)) {
		p := a.Payloads[name]
		if p.Build == "" {
			continue
		}
		at := a.Pos(pointer("payloads", name) + "/build")
		if p.Runtime != "vm" {
			ds.Errorf(at, "payload %s: build: makes a VM image; runtime %q runs none (use runtime: vm)", name, p.Runtime)
			continue
		}
		for _, k := range []string{"image_hash", "image_tag", "image_url"} {
			if _, ok := p.Params[k]; ok {
				ds.Errorf(at, "payload %s: build: and params.%s both name the image: keep one (the built image is named by the hash of its context)", name, k)
			}
		}
		if fi, err := os.Stat(filepath.Dir(at.File)); (err != nil || !fi.IsDir()) && !filepath.IsAbs(p.Build) {
			ds.Errorf(at, "payload %s: build: %s: a relative build context is read from the descriptor file's folder, and %s is not on disk (a package?): write an absolute path", name, p.Build, at.File)
			continue
		}
		fi, err := os.Stat(p.BuildDir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ds.Errorf(at, "payload %s: build context %s: no such directory (%s; relative to the descriptor file, as in Compose)", name, p.Build, p.BuildDir)
			continue
		case err != nil:
			ds.Errorf(at, "payload %s: build context %s: %v", name, p.Build, err)
			continue
		case !fi.IsDir():
			ds.Errorf(at, "payload %s: build context %s is a file, not a directory holding a Dockerfile", name, p.Build)
			continue
		}
		if fi, err := os.Stat(filepath.Join(p.BuildDir, "Dockerfile")); err != nil || !fi.Mode().IsRegular() {
			ds.Errorf(at, "payload %s: build context %s has no Dockerfile (%s)", name, p.Build, filepath.Join(p.BuildDir, "Dockerfile"))
		}
	}
}
