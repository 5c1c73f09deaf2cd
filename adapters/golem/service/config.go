// Package service is the golem-service adapter: one resource is one instance
// of a GAP-16 service, rented from one provider. It negotiates an agreement
// for the payload, adds the provider to the service's VPN, starts an
// activity, deploys and starts the image and runs the init commands. The
// state call reads the activity and the agreement; destroy undoes it all.
package service

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
)

// Config is the resource config adapters/golem/lowering builds from a GAP-16 service
// instance (references already resolved by the engine).
type Config struct {
	Name     string  `json:"name"`
	Instance int     `json:"instance"`
	Payload  Payload `json:"payload"`
	Network  *NetRef `json:"network,omitempty"`
	// IP lists the descriptor's node addresses, one per instance.
	IP []string `json:"ip,omitempty"`
	// NodeIP is this instance's VPN address as gcompose planned it
	// (adapters/golem/lowering planNodeIPs): the same on every deploy and rebuild.
	NodeIP string    `json:"node_ip,omitempty"`
	Init   []InitCmd `json:"init,omitempty"`
	// AllocationID is the app's allocation (an output of the payments
	// resource): demands are decorated with its payment platform.
	AllocationID string `json:"allocation_id,omitempty"`
	// App tags the demand (property gcompose.app) so the app's payments
	// keeper accepts only its own debit notes.
	App string `json:"app,omitempty"`
	// VPNMembers are the rented instances on the service's VPN, itself
	// included (adapters/golem/lowering vpn_members): the plan's joint
	// estimate, and the fingerprint the create tags its demand with.
	VPNMembers []VPNMember `json:"vpn_members,omitempty"`

	// image is the payload's image as ResolveImage found it.
	image *Image
}

// Payload is a GAP-16 payload.
type Payload struct {
	Name         string         `json:"name,omitempty"`
	Runtime      string         `json:"runtime"`
	Constraints  []string       `json:"constraints,omitempty"`
	Capabilities []string       `json:"capabilities,omitempty"`
	Params       map[string]any `json:"params,omitempty"`
}

// NetRef names the VPN a service joins.
type NetRef struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// InitCmd is one init command; only run is supported.
type InitCmd struct {
	Run *RunCmd `json:"run,omitempty"`
}

// RunCmd runs args[0] with the rest as its arguments.
type RunCmd struct {
	Args       []string `json:"args"`
	EntryPoint string   `json:"entry_point,omitempty"`
}

// PlannedIP is the address planned for this instance, "" when none: the
// lowering's node_ip, else the descriptor's ip[instance] (a config written
// by hand).
func (c Config) PlannedIP() string {
	if c.NodeIP != "" {
		return c.NodeIP
	}
	if c.Instance >= 0 && c.Instance < len(c.IP) {
		return c.IP[c.Instance]
	}
	return ""
}

func (c Config) param(k string) string {
	s, _ := c.Payload.Params[k].(string)
	return s
}

// Subnet is the provider subnet (golem.node.debug.subnet): payload param
// subnet_tag, else "public".
func (c Config) Subnet() string {
	if s := c.param("subnet_tag"); s != "" {
		return s
	}
	return "public"
}

// DefaultDeployTimeout bounds deploy + start: the provider downloads the
// image first, minutes for a large one on a real network. Payload param
// deploy_timeout (a Go duration) overrides it.
const DefaultDeployTimeout = 15 * time.Minute

// DeployTimeout is how long deploy + start may take.
func (c Config) DeployTimeout(def time.Duration) (time.Duration, error) {
	s := c.param("deploy_timeout")
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("payload %s: params.deploy_timeout %q: want a duration such as 20m", c.Payload.Name, s)
	}
	return d, nil
}

// DefaultExpiration is how long a rented activity may run unless the
// payload's params.expiration (a Go duration such as "8h") says otherwise;
// providers terminate the agreement past it.
const DefaultExpiration = 3 * time.Hour

// Expiration is the demand's golem.srv.comp.expiration, from now.
func (c Config) Expiration() (time.Duration, error) {
	s := c.param("expiration")
	if s == "" {
		return DefaultExpiration, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("payload %s: params.expiration %q: want a duration such as 8h", c.Payload.Name, s)
	}
	return d, nil
}

// TaskPackage is the golem.srv.comp.task_package of the payload's image:
// "hash:sha3:<hash>:<url>" (golem-js workload-demand-director.ts, yapapi
// payload/package.py), of the image ResolveImage found.
func (c Config) TaskPackage() (string, error) {
	if c.image == nil {
		if _, err := c.imageParams(); err != nil {
			return "", err
		}
		return "", fmt.Errorf("payload %s: the image is not resolved yet", c.Payload.Name)
	}
	return "hash:sha3:" + c.image.Hash + ":" + c.image.URL, nil
}

// ManifestRuntime is GAP-16's runtime of manifest payloads. No provider
// advertises it: they run it on runtime vm with capability manifest-support
// (dapp-runner dapp.py __implicit_manifest_support; yagna
// agent/provider/src/provider_agent.rs build_service_info).
const ManifestRuntime = "vm/manifest"

// Runtime is the golem.runtime.name to ask providers for.
func (c Config) Runtime() string {
	if c.Payload.Runtime == ManifestRuntime {
		return "vm"
	}
	return c.Payload.Runtime
}

// Capabilities are the golem.runtime.capabilities to ask for: the payload's
// (its capabilities, and params.capabilities as dapp-runner descriptors
// write them), plus manifest-support for a manifest payload and vpn for a
// service on a network. dapp-runner adds these two only when the payload
// names no capabilities (dapp.py __implicit_vpn, __implicit_manifest_support);
// they are added here in any case, as neither a VPN nor a manifest works on a
// provider without them (yagna exe-unit/src/manifest.rs build_default_features
// starts the VPN endpoint only with vpn).
func (c Config) Capabilities() []string {
	var out []string
	add := func(cs ...string) {
		for _, x := range cs {
			if x != "" && !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	add(c.Payload.Capabilities...)
	if l, ok := c.Payload.Params["capabilities"].([]any); ok {
		for _, x := range l {
			s, _ := x.(string)
			add(s)
		}
	}
	if c.Payload.Runtime == ManifestRuntime {
		add("manifest-support")
	}
	if c.Network != nil {
		add("vpn")
	}
	return out
}

// Minimums of a VM demand: params min_mem_gib, min_storage_gib and
// min_cpu_threads, with the defaults of yapapi (yapapi/payload/vm.py repo and
// manifest: 0.5 GiB, 2 GiB, 1 thread) and golem-js
// (src/market/demand/directors/workload-demand-director-config.ts).
var minimums = []struct {
	param, property string
	def             float64
}{
	{"min_mem_gib", "golem.inf.mem.gib", 0.5},
	{"min_storage_gib", "golem.inf.storage.gib", 2},
	{"min_cpu_threads", "golem.inf.cpu.threads", 1},
}

// Minimums are the demand's resource constraints of a VM payload.
func (c Config) Minimums() ([]string, error) {
	if c.Runtime() != "vm" {
		return nil, nil
	}
	var out []string
	for _, m := range minimums {
		v := m.def
		switch x := c.Payload.Params[m.param].(type) {
		case nil:
		case float64:
			v = x
		case string:
			if _, err := fmt.Sscanf(x, "%g", &v); err != nil {
				return nil, fmt.Errorf("payload %s: params.%s %q: want a number", c.Payload.Name, m.param, x)
			}
		default:
			return nil, fmt.Errorf("payload %s: params.%s: want a number, got %v", c.Payload.Name, m.param, x)
		}
		if v < 0 {
			return nil, fmt.Errorf("payload %s: params.%s %v is negative", c.Payload.Name, m.param, v)
		}
		out = append(out, fmt.Sprintf("%s>=%s", m.property, strconv.FormatFloat(v, 'f', -1, 64)))
	}
	return out, nil
}

// Constraints is the demand's filter: the runtime, the subnet, the usual
// minimums, the payload's constraints and the capabilities, AND-joined, plus
// extra (the payment decorations).
func (c Config) Constraints(extra ...string) (string, error) {
	return c.ConstraintsIn(c.Subnet(), extra...)
}

// ConstraintsIn is Constraints for providers of another subnet.
func (c Config) ConstraintsIn(subnet string, extra ...string) (string, error) {
	cons := []string{"golem.runtime.name=" + c.Runtime(), "golem.node.debug.subnet=" + subnet}
	mins, err := c.Minimums()
	if err != nil {
		return "", err
	}
	cons = append(cons, mins...)
	cons = append(cons, c.Payload.Constraints...)
	cons = append(cons, extra...)
	f, err := constraint.FromGAP16(cons, c.Capabilities())
	if err != nil {
		return "", fmt.Errorf("payload %s: %w", c.Payload.Name, err)
	}
	return f, nil
}

// Fingerprint is the lowering's fingerprint of this instance's config (its
// vpn_members entry's "config"), "" when it is on no VPN with others or
// the lowering gave none.
func (c Config) Fingerprint() string {
	me := c.PlannedIP()
	if me == "" {
		return ""
	}
	for _, v := range c.VPNMembers {
		if v.NodeIP == me {
			return v.Config
		}
	}
	return ""
}

// rebuildFields are the config fields whose change needs another rental
// (the image and demand, the init commands, the address, the VPN).
var rebuildFields = []string{"payload", "init", "ip", "network"}

// Fingerprints hashes each rebuild field of a config; the create action
// records them in the identity, and the state call compares them, so a
// change names the field that forces the rebuild.
func Fingerprints(cfg map[string]any) map[string]string {
	out := make(map[string]string, len(rebuildFields))
	for _, k := range rebuildFields {
		b, _ := json.Marshal(cfg[k]) // map keys are sorted: canonical
		sum := sha256.Sum256(b)
		out[k] = hex.EncodeToString(sum[:8])
	}
	return out
}

// rebuildForces names the rebuild fields whose fingerprint changed.
func rebuildForces(applied map[string]string, cur map[string]any) []string {
	if len(applied) == 0 {
		return nil
	}
	now := Fingerprints(cur)
	var forces []string
	for _, k := range rebuildFields {
		if applied[k] != now[k] {
			forces = append(forces, "/"+k)
		}
	}
	return forces
}

const configSchema = `{
  "type": "object",
  "required": ["name", "payload"],
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "instance": {"type": "integer", "minimum": 0},
    "payload": {"type": "object", "required": ["runtime"], "properties": {
      "runtime": {"type": "string"},
      "constraints": {"type": "array", "items": {"type": "string"}},
      "capabilities": {"type": "array", "items": {"type": "string"}},
      "params": {"type": "object"}
    }},
    "network": {"type": "object", "properties": {"name": {"type": "string"}, "id": {"type": "string"}}},
    "ip": {"type": "array", "items": {"type": "string"}},
    "node_ip": {"type": "string"},
    "init": {"type": "array", "items": {"type": "object"}},
    "allocation_id": {"type": "string"},
    "app": {"type": "string"},
    "vpn_members": {"type": "array", "items": {"type": "object", "properties": {
      "service": {"type": "string"}, "name": {"type": "string"}, "node_ip": {"type": "string"},
      "config": {"type": "string"}, "params": {"type": "object"}, "after": {"type": "array", "items": {"type": "string"}}
    }}}
  }
}`
