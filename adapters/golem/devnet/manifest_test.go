package devnet_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// manifestAsking is a computation manifest whose compManifest.net.inet.out is out (JSON), or none when
// out is "".
func manifestAsking(out string) string {
	m := `{"version":"0.1.0","createdAt":"2026-01-01T00:00:00Z","expiresAt":"2100-01-01T00:00:00Z",` +
		`"payload":[{"urls":["http://registry.invalid/x.gvmi"],"hash":"sha3:` + testHash + `"}]`
	if out != "" {
		m += `,"compManifest":{"version":"0.1.0","net":{"inet":{"out":` + out + `}}}`
	}
	return base64.StdEncoding.EncodeToString([]byte(m + "}"))
}

// TestRuleManifestOutbound is the provider agent's manifest check (agent/provider/src/market/negotiator/
// builtin/manifest.rs, rules/outbound.rs): a manifest that asks for outbound access is taken only when an
// outbound rule matches (everyone: all, or the whitelist holding every URL's host; audited-payload: a
// signed manifest with a rule for its certificate), else rejected for good, naming every rule that did
// not match; a provider with the agent's defaults (everyone whitelist, an empty whitelist) refuses any.
func TestRuleManifestOutbound(t *testing.T) {
	ctx := ctxT(t, 2*time.Minute)
	type step struct {
		name   string
		props  map[string]any
		reject string // "" when the provider takes it
	}
	run := func(t *testing.T, rules devnet.OutboundRules, steps []step) {
		t.Helper()
		e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Outbound: rules}}})
		m := e.market(ctx)
		for _, s := range steps {
			props := validDemand(map[string]any{"golem.node.debug.subnet": "public"})
			for k, v := range s.props {
				props[k] = v
			}
			draft, reason := m.counter(ctx, props)
			switch {
			case s.reject == "" && draft == nil:
				t.Errorf("%s: rejected: %s", s.name, reason)
			case s.reject != "" && (draft != nil || !strings.Contains(reason, s.reject)):
				t.Errorf("%s: answered %v / %q, want a rejection with %q", s.name, draft != nil, reason, s.reject)
			}
		}
	}
	api := map[string]any{"golem.srv.comp.payload": manifestAsking(`{"urls":["https://api.example.org/v1/x"]}`)}
	other := map[string]any{"golem.srv.comp.payload": manifestAsking(`{"urls":["https://api.example.org/v1/x","http://other.example.net:8080/"]}`)}
	anyURL := map[string]any{"golem.srv.comp.payload": manifestAsking(`{"unrestricted":{"urls":true}}`)}
	signed := func(m map[string]any) map[string]any {
		return map[string]any{"golem.srv.comp.payload": m["golem.srv.comp.payload"], "golem.srv.comp.payload.sig": "00ff",
			"golem.srv.comp.payload.sig.algorithm": "sha256", "golem.srv.comp.payload.cert": "LS0t"}
	}

	t.Run("defaults", func(t *testing.T) {
		run(t, devnet.OutboundRules{}, []step{
			{"no outbound asked", map[string]any{"golem.srv.comp.payload": manifestAsking("")}, ""},
			{"an empty URL list", map[string]any{"golem.srv.comp.payload": manifestAsking(`{"urls":[]}`)}, ""},
			{"one URL", api, "Outbound rejected because: Everyone rule didn't match whitelist ; Audited-Payload rule requires manifest signature ; Partner rule requires node descriptor"},
			{"a signed manifest, no certificate trusted", signed(api), "Audited-Payload rule whole chain of cert_ids is not trusted"},
			{"not base64", map[string]any{"golem.srv.comp.payload": "%%%"}, "invalid manifest"},
			{"unrestricted false", map[string]any{"golem.srv.comp.payload": manifestAsking(`{"unrestricted":{"urls":false}}`)}, "'unrestricted.urls: false' is not valid"},
		})
	})
	t.Run("whitelist", func(t *testing.T) {
		run(t, devnet.OutboundRules{Whitelist: []string{"api.example.org", `regex:\.trusted\.io$`}}, []step{
			{"a whitelisted host", api, ""},
			{"a regex-whitelisted host", map[string]any{"golem.srv.comp.payload": manifestAsking(`{"urls":["wss://a.b.trusted.io/ws"]}`)}, ""},
			{"one host outside it", other, "Everyone rule didn't match whitelist"},
			{"unrestricted", anyURL, "Everyone rule didn't match whitelist"},
		})
	})
	t.Run("audited payload", func(t *testing.T) {
		run(t, devnet.OutboundRules{Everyone: "none", AuditedPayload: "all"}, []step{
			{"unsigned", api, "Everyone rule is disabled ; Audited-Payload rule requires manifest signature"},
			{"signed", signed(other), ""},
			{"signed, no certificate", map[string]any{"golem.srv.comp.payload": api["golem.srv.comp.payload"], "golem.srv.comp.payload.sig": "00ff"}, "Audited-Payload rule: a signature needs"},
		})
	})
	t.Run("everyone all", func(t *testing.T) {
		run(t, devnet.OutboundRules{Everyone: "all"}, []step{{"unrestricted", anyURL, ""}})
	})
	t.Run("disabled", func(t *testing.T) {
		run(t, devnet.OutboundRules{Disabled: true, Everyone: "all"}, []step{{"one URL", api, "outbound is disabled"}})
	})
	if _, err := devnet.New(ctx, devnet.Options{Config: devnet.Config{Providers: []devnet.ProviderConfig{{Outbound: devnet.OutboundRules{Everyone: "some"}}}}, AppKey: "k", Docker: nil}); err == nil {
		t.Error("an unknown outbound mode was taken")
	}
}
