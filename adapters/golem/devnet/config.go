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
	// DebitNoteInterval is how often a provider issues a debit note for each running activity, and the
	// golem.com.scheme.payu.debit-note.interval-sec? its offer proposes (default 2min, as
	// agent/provider/src/market/negotiator/factory.rs).
	DebitNoteInterval Duration `yaml:"debitNoteInterval"`
	// DebitNoteAcceptTimeout is the golem.com.payment.debit-notes.accept-timeout? a provider offers
	// (default 4min, factory.rs; at least 5s, builtin/expiration.rs): the longest deadline it takes. It
	// terminates an agreement whose debit note stays unaccepted past the deadline agreed.
	DebitNoteAcceptTimeout Duration `yaml:"debitNoteAcceptTimeout"`
	// IdleAgreementTimeout is how long a provider keeps an approved agreement on which no activity runs
	// (after its approval or its last activity's end) before it terminates it NoActivity (default 90s,
	// TaskConfig::idle_agreement_timeout, agent/provider/src/tasks/config.rs).
	IdleAgreementTimeout Duration `yaml:"idleAgreementTimeout"`
	// AgreementClock speeds agreement time up: an agreement ends Expired after (its
	// golem.srv.comp.expiration - its approval) / AgreementClock of real time (default 1: at its
	// expiration, agent/provider/src/tasks/task_manager.rs schedule_expiration). The negotiation's
	// limits (at least 5 min, builtin/expiration.rs) stay as they are: tests shorten the wait, not the rule.
	AgreementClock float64 `yaml:"agreementClock"`
	// CounterTimeout is how long yagna holds a counter-proposal to a provider that does not answer
	// (NoCounterAnswer) before it answers 500 (default 60s, core/market/src/rest_api/requestor.rs).
	CounterTimeout Duration `yaml:"counterTimeout"`
	// Negotiation are the providers' negotiator limits (expiration, intervals, timeouts).
	Negotiation Negotiation `yaml:"negotiation"`
	// Accounts are the requestor's funded payment accounts: platform → funds (GLM, a decimal). Default
	// {erc20-hoodi-tglm: "1000"}: what `yagna payment fund` funds today (its default network is Hoodi,
	// core/model/src/payment.rs). An allocation beyond an account's funds is refused like yagna does.
	Accounts map[string]string `yaml:"accounts"`
	// Relax turns strict rules off, one by one (all false: as strict as yagna and its providers).
	Relax Relax `yaml:"relax"`
	// History gives the requestor node a past: this many settled debit notes of an agreement that ended
	// long ago, as a node that has run apps for months holds (what GET /debitNotes lists).
	History int `yaml:"history"`
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
	// PriceStep, when set, is added to Coeffs (element by element) every time the provider makes an offer
	// after its first: a provider that raises (or, negative, lowers) its price between offers, as one
	// whose owner edits its preset does. Agreements are billed at the agreed offer's price.
	PriceStep []float64 `yaml:"priceStep"`
	// Constraints is the offer's constraint expression; empty means "(golem.node.debug.subnet=<Subnet>)".
	Constraints string `yaml:"constraints"`
	// MaxAgreements is how many agreements (Pending or Approved) a provider takes at once (default 1): a
	// busy provider makes no proposals, rejects counter-proposals and agreements.
	MaxAgreements int `yaml:"maxAgreements"`
	// Properties are extra offer properties (flat dotted keys), overriding the generated ones.
	Properties map[string]any `yaml:"properties"`
	// DebitNoteAcceptTimeout overrides the devnet's for this provider kind.
	DebitNoteAcceptTimeout Duration `yaml:"debitNoteAcceptTimeout"`
	// AnswerDelay is how long this kind of provider takes to answer a counter-proposal (its Draft or
	// its rejection comes as an event that much later): a provider agent's negotiator answers
	// asynchronously (agent/provider/src/market/provider_market.rs process_proposal), over the network.
	AnswerDelay Duration `yaml:"answerDelay"`
	// NoCounterAnswer makes this kind of provider unreachable for counter-proposals: yagna holds the
	// call for the devnet's counterTimeout, then answers 500 (core/market/src/rest_api/requestor.rs
	// counter_proposal, .timeout(Some(60)); CounterProposalError::Timeout).
	NoCounterAnswer bool `yaml:"noCounterAnswer"`
	// Outbound are the provider's outbound rules for manifests that ask for outbound access (manifest.go);
	// default as the provider agent's: everyone whitelist, an empty whitelist (all refused).
	Outbound OutboundRules `yaml:"outbound"`
}

// Relax names the rules a devnet may stop enforcing.
type Relax struct {
	// ChosenPlatform: take counter-proposals without golem.com.payment.chosen-platform, or naming a
	// platform the provider does not take.
	ChosenPlatform bool `yaml:"chosenPlatform"`
	// PaymentTerms: skip the expiration, debit-note deadline, interval and payment-timeout
	// negotiation; agreements use the devnet's own interval and deadline.
	PaymentTerms bool `yaml:"paymentTerms"`
	// Funds: allocations need no funded account.
	Funds bool `yaml:"funds"`
	// Capabilities: join VPNs on providers without the vpn capability, and read manifests on
	// providers without manifest-support.
	Capabilities bool `yaml:"capabilities"`
}

// Faults are the knobs tests use to prove recovery.
type Faults struct {
	// RejectProposals makes providers answer counter-proposals with a ProposalRejectedEvent.
	RejectProposals bool `json:"rejectProposals" yaml:"rejectProposals"`
	// RejectAgreements makes providers reject confirmed agreements.
	RejectAgreements bool `json:"rejectAgreements" yaml:"rejectAgreements"`
	// Slow delays every yagna API answer by this duration.
	Slow Duration `json:"slow" yaml:"slow"`

	// The knobs below make the devnet do what a real network does now and then (docs/golem.md, "The
	// devnet's faults"); all are off by default.

	// ExecPollErrors are the statuses the next exec batch-result polls answer instead of the results, one
	// per poll: 500 (GSB error "endpoint address not found": yagna cannot reach the exe-unit for a moment),
	// 504 (a gateway timeout) or 408 (the provider did not answer within the poll's timeout).
	ExecPollErrors []int `json:"execPollErrors,omitempty" yaml:"execPollErrors"`
	// ImageDownload is how long each deploy takes before its container exists, as a provider downloading
	// the image (minutes for a large one on a real network).
	ImageDownload Duration `json:"imageDownload" yaml:"imageDownload"`
	// DeployErrors makes the next N deploys fail on their provider ("image download failed"), as a
	// provider that cannot fetch or start the image does.
	DeployErrors int `json:"deployErrors,omitempty" yaml:"deployErrors"`
	// DaoErrors makes the next N activity state calls answer yagna's own database failure, a 500
	// "DAO error: …" (core/activity/src/error.rs Error::Dao): the local node's error, not the provider's.
	DaoErrors int `json:"daoErrors,omitempty" yaml:"daoErrors"`
	// ApprovalDelay is how long a provider takes to approve a confirmed agreement (it stays Pending
	// meanwhile), as a provider agent whose negotiators are not all ready yet
	// (agent/provider/src/market/negotiator/composite.rs).
	ApprovalDelay Duration `json:"approvalDelay" yaml:"approvalDelay"`
	// InvoiceDelay is how long after an agreement ends its provider sends the invoice (a real provider
	// issues it once the activities are destroyed and the agreement closed, and retries sending it).
	InvoiceDelay Duration `json:"invoiceDelay" yaml:"invoiceDelay"`
	// AcceptErrors are the statuses the next debit note or invoice accept calls answer without accepting,
	// one per call: 500 (yagna's database or GSB failing) or 504 (the provider did not acknowledge in
	// time: yagna's "Timeout accepting Debit Note on remote Node.", core/payment/src/api/debit_notes.rs
	// accept_debit_note, a 504 Gateway Timeout, not a 408).
	AcceptErrors []int `json:"acceptErrors,omitempty" yaml:"acceptErrors"`
}

// check validates the knobs a client sets.
func (f Faults) check() error {
	for _, st := range f.ExecPollErrors {
		if _, ok := unreachableMessages[st]; !ok {
			return fmt.Errorf("execPollErrors: %d is not one of 408, 500, 504", st)
		}
	}
	for _, st := range f.AcceptErrors {
		if st == 408 {
			return fmt.Errorf("acceptErrors: 408: yagna answers an accept the provider did not acknowledge in time with 504 (core/payment/src/api/debit_notes.rs): use 504")
		}
		if st != 504 && st != 500 {
			return fmt.Errorf("acceptErrors: %d is not one of 500, 504", st)
		}
	}
	if f.DeployErrors < 0 || f.DaoErrors < 0 {
		return fmt.Errorf("deployErrors and daoErrors must not be negative")
	}
	return nil
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
	if c.DebitNoteAcceptTimeout.Duration < minAcceptTimeout {
		return c, fmt.Errorf("devnet config: debitNoteAcceptTimeout %s: a provider takes no deadline below %s (agent/provider/src/market/negotiator/builtin/expiration.rs)", c.DebitNoteAcceptTimeout, minAcceptTimeout)
	}
	c.Negotiation = c.Negotiation.withDefaults()
	if err := c.checkClock(); err != nil {
		return c, err
	}
	if c.CounterTimeout.Duration <= 0 {
		c.CounterTimeout.Duration = 60 * time.Second
	}
	if c.IdleAgreementTimeout.Duration == 0 {
		c.IdleAgreementTimeout.Duration = defaultIdleAgreementTimeout
	}
	if c.Accounts == nil {
		c.Accounts = map[string]string{"erc20-hoodi-tglm": "1000"}
	}
	for plat, funds := range c.Accounts {
		if _, err := parsePlatform(plat); err != nil {
			return c, fmt.Errorf("devnet config: accounts: %w", err)
		}
		if _, err := parseAmount(funds); err != nil {
			return c, fmt.Errorf("devnet config: accounts: %s: %w", plat, err)
		}
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
		if err := p.Outbound.check(); err != nil {
			return c, fmt.Errorf("devnet config: provider %s: %w", p.Name, err)
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
		if strings.Contains(p.Runtime, "/") {
			// GAP-16's vm/manifest is runtime vm with capability manifest-support
			// (agent/provider/src/provider_agent.rs build_service_info).
			return c, fmt.Errorf("devnet config: provider %s: runtime %q: providers advertise runtime names such as vm; a manifest-capable vm provider has capability manifest-support", p.Name, p.Runtime)
		}
		if p.Capabilities == nil {
			// What a vm provider advertises (docs/provider/installing-exeunit.md).
			p.Capabilities = []string{"inet", "vpn", "manifest-support", "start-entrypoint"}
		}
		if p.DebitNoteAcceptTimeout.Duration == 0 {
			p.DebitNoteAcceptTimeout = c.DebitNoteAcceptTimeout
		}
		if p.DebitNoteAcceptTimeout.Duration < minAcceptTimeout {
			return c, fmt.Errorf("devnet config: provider %s: debitNoteAcceptTimeout %s is below %s", p.Name, p.DebitNoteAcceptTimeout, minAcceptTimeout)
		}
		if p.Subnet == "" {
			p.Subnet = "public"
		}
		if len(p.PaymentPlatforms) == 0 {
			p.PaymentPlatforms = []string{"erc20-hoodi-tglm", "erc20-holesky-tglm", "erc20-polygon-glm"}
		}
		for _, plat := range p.PaymentPlatforms {
			if _, err := parsePlatform(plat); err != nil {
				return c, fmt.Errorf("devnet config: provider %s: %w", p.Name, err)
			}
		}
		if len(p.Coeffs) == 0 {
			p.Coeffs = []float64{0.0001, 0.0001, 0}
		}
		if len(p.Coeffs) != 3 {
			return c, fmt.Errorf("devnet config: provider %s: coeffs must be [per duration sec, per cpu sec, start]", p.Name)
		}
		if len(p.PriceStep) != 0 && len(p.PriceStep) != 3 {
			return c, fmt.Errorf("devnet config: provider %s: priceStep must be [per duration sec, per cpu sec, start] like coeffs", p.Name)
		}
	}
	if err := c.Faults.check(); err != nil {
		return c, fmt.Errorf("devnet config: faults: %w", err)
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
