package devnet

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The provider agent's manifest check (yagna agent/provider/src/market/negotiator/builtin/manifest.rs
// ManifestSignature, agent/provider/src/rules/outbound.rs OutboundRules): a demand whose computation
// manifest (golem.srv.comp.payload, base64 JSON) asks for outbound access (compManifest.net.inet.out:
// {"urls": [...]} non-empty, or {"unrestricted": {"urls": true}}; utils/manifest-utils/src/manifest.rs
// OutboundAccess) is accepted only when one outbound rule matches, else rejected for good:
//   - outbound disabled: "outbound is disabled";
//   - everyone: mode all accepts, whitelist accepts when every URL's host is in the domain whitelist
//     (an unrestricted request never matches a whitelist), none refuses;
//   - audited-payload: needs golem.srv.comp.payload.sig (with .sig.algorithm and .cert) verified against a
//     certificate the provider trusts, with a rule of that certificate: the devnet verifies no signature,
//     it takes a signed manifest as verified when AuditedPayload is set and checks that mode;
//   - partner: needs a node descriptor signed by a trusted certificate (golem.srv.comp.payload.node-descriptor):
//     the devnet has none, so it never matches.
// A manifest that cannot be decoded is rejected ("invalid manifest: ..."). The provider agent's defaults
// (OutboundConfig::default, DomainPatterns::default): outbound enabled, everyone whitelist, an empty
// whitelist: a default provider refuses every outbound request, which is the devnet's default too.

// OutboundRules are a provider's outbound rules (ya-provider rule set outbound ..., ya-provider whitelist
// add ...).
type OutboundRules struct {
	// Disabled turns outbound off (ya-provider rule set outbound disable).
	Disabled bool `yaml:"disabled"`
	// Everyone is the everyone rule's mode: all, none or whitelist (default whitelist).
	Everyone string `yaml:"everyone"`
	// Whitelist are the domain patterns: a domain matched exactly (strict), or "regex:<pattern>" matched
	// as a case-insensitive regular expression, anywhere in the host (the provider wraps regex patterns
	// in .*).
	Whitelist []string `yaml:"whitelist"`
	// AuditedPayload is the audited-payload rule's mode for signed manifests (all, none or whitelist;
	// empty: no rule, a signed manifest matches nothing).
	AuditedPayload string `yaml:"auditedPayload"`
}

func (o OutboundRules) check() error {
	for _, m := range []string{o.Everyone, o.AuditedPayload} {
		if m != "" && m != "all" && m != "none" && m != "whitelist" {
			return fmt.Errorf("outbound rule mode %q: want all, none or whitelist", m)
		}
	}
	for _, w := range o.Whitelist {
		if re, ok := strings.CutPrefix(w, "regex:"); ok {
			if _, err := regexp.Compile("(?i)" + re); err != nil {
				return fmt.Errorf("outbound whitelist pattern %q: %w", w, err)
			}
		}
	}
	return nil
}

const (
	propManifest     = "golem.srv.comp.payload"
	propManifestSig  = "golem.srv.comp.payload.sig"
	propManifestAlg  = "golem.srv.comp.payload.sig.algorithm"
	propManifestCert = "golem.srv.comp.payload.cert"
)

// outboundOf reads what a manifest asks: the URLs, or unrestricted; requested is false when it asks nothing.
func outboundOf(encoded string) (urls []string, unrestricted, requested bool, err error) {
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return nil, false, false, fmt.Errorf("invalid manifest: not base64: %v", err)
	}
	var m struct {
		CompManifest *struct {
			Net *struct {
				Inet *struct {
					Out *struct {
						URLs         []string `json:"urls"`
						Unrestricted *struct {
							URLs bool `json:"urls"`
						} `json:"unrestricted"`
					} `json:"out"`
				} `json:"inet"`
			} `json:"net"`
		} `json:"compManifest"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, false, false, fmt.Errorf("invalid manifest: %v", err)
	}
	if m.CompManifest == nil || m.CompManifest.Net == nil || m.CompManifest.Net.Inet == nil || m.CompManifest.Net.Inet.Out == nil {
		return nil, false, false, nil
	}
	out := m.CompManifest.Net.Inet.Out
	if out.Unrestricted != nil {
		if !out.Unrestricted.URLs {
			return nil, false, false, fmt.Errorf("invalid manifest: 'unrestricted.urls: false' is not valid")
		}
		return nil, true, true, nil
	}
	for _, u := range out.URLs {
		if _, err := url.Parse(u); err != nil {
			return nil, false, false, fmt.Errorf("invalid manifest: outbound URL %q: %v", u, err)
		}
	}
	return out.URLs, false, len(out.URLs) > 0, nil
}

// whitelisted says whether every URL's host matches a whitelist pattern (OutboundRules::whitelist_matching).
func (o OutboundRules) whitelisted(urls []string, unrestricted bool) bool {
	if unrestricted {
		return false
	}
	for _, raw := range urls {
		u, _ := url.Parse(raw)
		host := strings.ToLower(u.Hostname())
		if host == "" {
			continue // the provider matches only URLs with a host (Url::host_str)
		}
		if !slices.ContainsFunc(o.Whitelist, func(w string) bool {
			if re, ok := strings.CutPrefix(w, "regex:"); ok {
				m, _ := regexp.MatchString("(?i)"+re, host)
				return m
			}
			return strings.EqualFold(w, host)
		}) {
			return false
		}
	}
	return true
}

func (o OutboundRules) mode(m string, urls []string, unrestricted bool) error {
	switch m {
	case "all":
		return nil
	case "none":
		return fmt.Errorf("rule is disabled")
	default:
		if o.whitelisted(urls, unrestricted) {
			return nil
		}
		return fmt.Errorf("rule didn't match whitelist")
	}
}

// manifestRules is the negotiator component (negotiate) that checks a manifest's outbound request
// against the provider's outbound rules.
func (s *Server) manifestRules(p *provider, demand, _ map[string]any, _ time.Time) (verdict, bool) {
	encoded, ok := demand[propManifest].(string)
	if !ok {
		if _, present := demand[propManifest]; present {
			return rejected(true, "invalid manifest type: %T", demand[propManifest]), false
		}
		return verdict{}, false
	}
	urls, unrestricted, requested, err := outboundOf(encoded)
	if err != nil {
		return rejected(true, "%v", err), false
	}
	if !requested {
		return verdict{}, false
	}
	o := p.cfg.Outbound
	if o.Disabled {
		return rejected(true, "outbound is disabled"), false
	}
	var why []string
	everyone := o.Everyone
	if everyone == "" {
		everyone = "whitelist"
	}
	if err := o.mode(everyone, urls, unrestricted); err == nil {
		return verdict{}, false
	} else {
		why = append(why, "Everyone "+err.Error())
	}
	_, signed := demand[propManifestSig].(string)
	_, alg := demand[propManifestAlg].(string)
	_, cert := demand[propManifestCert].(string)
	switch {
	case !signed:
		why = append(why, "Audited-Payload rule requires manifest signature")
	case !alg || !cert:
		why = append(why, "Audited-Payload rule: a signature needs golem.srv.comp.payload.sig.algorithm and golem.srv.comp.payload.cert")
	case o.AuditedPayload == "":
		why = append(why, "Audited-Payload rule whole chain of cert_ids is not trusted")
	default:
		if err := o.mode(o.AuditedPayload, urls, unrestricted); err == nil {
			return verdict{}, false
		} else {
			why = append(why, "Audited-Payload "+err.Error())
		}
	}
	why = append(why, "Partner rule requires node descriptor")
	return rejected(true, "Outbound rejected because: %s ; ", strings.Join(why, " ; ")), false
}
