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
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
)

// Config is the resource config core/desired builds from a GAP-16 service
// instance (references already resolved by the engine).
type Config struct {
	Name     string  `json:"name"`
	Instance int     `json:"instance"`
	Payload  Payload `json:"payload"`
	Network  *NetRef `json:"network,omitempty"`
	// IP lists the planned node addresses, one per instance.
	IP   []string  `json:"ip,omitempty"`
	Init []InitCmd `json:"init,omitempty"`
	// AllocationID is the app's allocation (an output of the payments
	// resource): demands are decorated with its payment platform.
	AllocationID string `json:"allocation_id,omitempty"`
	// App tags the demand (property gcompose.app) so the app's payments
	// keeper accepts only its own debit notes.
	App string `json:"app,omitempty"`
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

// PlannedIP is the address planned for this instance, "" when none.
func (c Config) PlannedIP() string {
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

// TaskPackage is the golem.srv.comp.task_package of the payload's image.
func (c Config) TaskPackage() (string, error) {
	hash := strings.TrimPrefix(c.param("image_hash"), "sha3:")
	if hash == "" {
		return "", fmt.Errorf("payload %s: params.image_hash is required for runtime %s", c.Payload.Name, c.Payload.Runtime)
	}
	url := c.param("image_url")
	if url == "" {
		url = "http://registry.golem.network/download/" + hash
	}
	return "hash:sha3:" + hash + ":" + url, nil
}

// Constraints is the demand's filter: the runtime, the subnet and the
// payload's constraints and capabilities, AND-joined, plus extra (the
// payment decorations).
func (c Config) Constraints(extra ...string) (string, error) {
	cons := []string{"golem.runtime.name=" + c.Payload.Runtime, "golem.node.debug.subnet=" + c.Subnet()}
	cons = append(cons, c.Payload.Constraints...)
	cons = append(cons, extra...)
	f, err := constraint.FromGAP16(cons, c.Payload.Capabilities)
	if err != nil {
		return "", fmt.Errorf("payload %s: %w", c.Payload.Name, err)
	}
	return f, nil
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
    "init": {"type": "array", "items": {"type": "object"}},
    "allocation_id": {"type": "string"},
    "app": {"type": "string"}
  }
}`
