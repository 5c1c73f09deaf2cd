package devnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the devnet's configuration, usually read from a YAML file (see LoadConfig and
// adapters/golem/devnet/testdata/devnet.yaml).
type Config struct {
	// Instance names this devnet: every container and network it creates carries the label
	// gcompose.devnet=<Instance>, and leftovers with that label are removed at start.
	Instance string `yaml:"instance"`
	// Identity is the requestor's node id returned by GET /me ("0x" + 40 hex); derived from Instance when empty.
	Identity string `yaml:"identity"`
	// Name is the requestor's identity name.
	Name string `yaml:"name"`
	// Images maps an image hash (sha3-224 hex) to a local Docker image reference. It takes precedence over
	// images labelled golem.image.hash=<hash>.
	Images map[string]string `yaml:"images"`
	// DebitNoteInterval is how often a provider issues a debit note for each running activity.
	DebitNoteInterval Duration `yaml:"debitNoteInterval"`
	// DebitNoteAcceptTimeout is how long a provider waits for a debit note to be accepted before it
	// terminates the agreement.
	DebitNoteAcceptTimeout Duration `yaml:"debitNoteAcceptTimeout"`
	// Providers are the simulated provider nodes.
	Providers []ProviderConfig `yaml:"providers"`
	// Faults are the initial fault knobs (they can be changed at run time under /devnet/v1/faults).
	Faults Faults `yaml:"faults"`
	// Labels are extra labels put on every container and network (tests add gcompose.test=<name>).
	Labels map[string]string `yaml:"labels"`
}

// ProviderConfig describes one kind of provider; Count of them are simulated.
type ProviderConfig struct {
	Name             string   `yaml:"name"`
	Count            int      `yaml:"count"`
	Cores            int      `yaml:"cores"`
	Threads          int      `yaml:"threads"`
	MemGib           float64  `yaml:"memGib"`
	StorageGib       float64  `yaml:"storageGib"`
	Runtime          string   `yaml:"runtime"`
	Capabilities     []string `yaml:"capabilities"`
	Subnet           string   `yaml:"subnet"`
	PaymentPlatforms []string `yaml:"paymentPlatforms"`
	// Coeffs are the linear pricing coefficients: GLM per duration second, per CPU second, and the start price.
	Coeffs []float64 `yaml:"coeffs"`
	// Constraints is the offer's constraint expression; empty means "(golem.node.debug.subnet=<Subnet>)".
	Constraints string `yaml:"constraints"`
	// MaxAgreements is how many agreements (Pending or Approved) a provider takes at once (default 1): a
	// busy provider makes no proposals, rejects counter-proposals and agreements.
	MaxAgreements int `yaml:"maxAgreements"`
	// Properties are extra offer properties (flat dotted keys), overriding the generated ones.
	Properties map[string]any `yaml:"properties"`
}

// Faults are the knobs tests use to prove recovery.
type Faults struct {
	// RejectProposals makes providers answer counter-proposals with a ProposalRejectedEvent.
	RejectProposals bool `json:"rejectProposals" yaml:"rejectProposals"`
	// RejectAgreements makes providers reject confirmed agreements.
	RejectAgreements bool `json:"rejectAgreements" yaml:"rejectAgreements"`
	// Slow delays every yagna API answer by this duration.
	Slow Duration `json:"slow" yaml:"slow"`
}

// Duration is a time.Duration written as "1.5s" in YAML and JSON.
type Duration struct{ time.Duration }

// UnmarshalYAML reads "30s" or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return d.parse(n.Value)
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalJSON reads "30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	return d.parse(strings.Trim(string(b), `"`))
}

func (d *Duration) parse(s string) error {
	if s == "" || s == "null" {
		d.Duration = 0
		return nil
	}
	if v, err := time.ParseDuration(s); err == nil {
		d.Duration = v
		return nil
	}
	var secs float64
	if _, err := fmt.Sscanf(s, "%g", &secs); err != nil {
		return fmt.Errorf("duration %q: want e.g. 30s or a number of seconds", s)
	}
	d.Duration = time.Duration(secs * float64(time.Second))
	return nil
}

// LoadConfig reads a YAML configuration file; unknown fields are errors.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("devnet config: %w", err)
	}
	defer f.Close()
	var c Config
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("devnet config %s: %w", path, err)
	}
	return c, nil
}

var labelValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// withDefaults fills what the user left out and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Instance == "" {
		c.Instance = "default"
	}
	if !labelValue.MatchString(c.Instance) {
		return c, fmt.Errorf("devnet config: instance %q: use letters, digits, '.', '_' or '-'", c.Instance)
	}
	if c.Identity == "" {
		c.Identity = nodeID("requestor/" + c.Instance)
	}
	if c.Name == "" {
		c.Name = "devnet-requestor"
	}
	if c.DebitNoteInterval.Duration <= 0 {
		c.DebitNoteInterval.Duration = 2 * time.Minute
	}
	if c.DebitNoteAcceptTimeout.Duration <= 0 {
		c.DebitNoteAcceptTimeout.Duration = 4 * time.Minute
	}
	if len(c.Providers) == 0 {
		c.Providers = []ProviderConfig{{Name: "devnet-provider", Count: 4}}
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		if p.Name == "" {
			p.Name = fmt.Sprintf("devnet-provider-%d", i)
		}
		if p.Count <= 0 {
			p.Count = 1
		}
		if p.Cores <= 0 {
			p.Cores = 4
		}
		if p.MaxAgreements <= 0 {
			p.MaxAgreements = 1
		}
		if p.Threads <= 0 {
			p.Threads = p.Cores
		}
		if p.MemGib <= 0 {
			p.MemGib = 8
		}
		if p.StorageGib <= 0 {
			p.StorageGib = 40
		}
		if p.Runtime == "" {
			p.Runtime = "vm"
		}
		if p.Capabilities == nil {
			p.Capabilities = []string{"vpn", "inet", "manifest-support"}
		}
		if p.Subnet == "" {
			p.Subnet = "public"
		}
		if len(p.PaymentPlatforms) == 0 {
			p.PaymentPlatforms = []string{"erc20-holesky-tglm", "erc20-polygon-glm"}
		}
		if len(p.Coeffs) == 0 {
			p.Coeffs = []float64{0.0001, 0.0001, 0}
		}
		if len(p.Coeffs) != 3 {
			return c, fmt.Errorf("devnet config: provider %s: coeffs must be [per duration sec, per cpu sec, start]", p.Name)
		}
	}
	if _, ok := c.Labels[labelInstance]; ok {
		return c, fmt.Errorf("devnet config: label %s is reserved", labelInstance)
	}
	return c, nil
}

// nodeID derives a stable node id ("0x" + 40 hex) from a seed.
func nodeID(seed string) string {
	sum := sha256.Sum256([]byte("gcompose-devnet/" + seed))
	return "0x" + hex.EncodeToString(sum[:20])
}
