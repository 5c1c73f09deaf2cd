package address

import (
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/expr"
)

func TestOutputRefRoundTrip(t *testing.T) {
	cases := []struct {
		addr, output, text string
	}{
		{"services.db", "network_node.ip", "${services.db.network_node.ip}"},
		{"services.web[1]", "agreement.id", "${services.web[1].agreement.id}"},
		{"networks.default", "network_id", "${networks.default.network_id}"},
		{"resources.files", "sha256", "${resources.files.state.sha256}"},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			text := OutputRef(tc.addr, tc.output)
			if text != tc.text {
				t.Fatalf("OutputRef = %s, want %s", text, tc.text)
			}
			refs, err := expr.Parse(text)
			if err != nil || len(refs.Refs()) != 1 {
				t.Fatalf("parse %s: %v", text, err)
			}
			r := refs.Refs()[0]
			addr, field, err := ParseOutput(r.Text(), r.Path)
			if err != nil || addr != tc.addr || expr.PathString(field) != tc.output {
				t.Fatalf("ParseOutput = %s, %s, %v; want %s, %s", addr, expr.PathString(field), err, tc.addr, tc.output)
			}
		})
	}
}

func TestParseOutputErrors(t *testing.T) {
	cases := []struct{ text, err string }{
		{"${nodes.db.network_node.ip}", ""}, // dapp-runner's section name
		{"${resources.x.config.path}", "only resources.<name>.state.* is known at apply time"},
		{"${resources.x.state}", "names a whole resource"},
		{"${payloads.p.image}", "does not name a resource output"},
		{"${services.web}", "does not name a resource output"},
	}
	for _, tc := range cases {
		t.Run(tc.text, func(t *testing.T) {
			tmpl, err := expr.Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			r := tmpl.Refs()[0]
			addr, _, err := ParseOutput(r.Text(), r.Path)
			if tc.err == "" {
				if err != nil || addr != "services.db" {
					t.Fatalf("got %s, %v", addr, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), tc.text) {
				t.Fatalf("error %v, want %q naming %s", err, tc.err, tc.text)
			}
		})
	}
}
