package address

import (
	"strings"
	"testing"
)

func TestParseFormatAdapterName(t *testing.T) {
	cases := []struct {
		in, adapter, err string
	}{
		{in: "resources.n0", adapter: "n0"},
		{in: "resources.db-files", adapter: "db-files"},
		{in: "services.web", adapter: "web"},
		{in: "services.web[0]", adapter: "web-0"},
		{in: "services.web[12]", adapter: "web-12"},
		{in: "networks.net", adapter: "net"},
		{in: "web", err: "want services.NAME"},
		{in: "files.a", err: `"files" is not services`},
		{in: "resources.x[1]", err: "only a service takes an [index]"},
		{in: "services.web[01]", err: "the index must be a number"},
		{in: "services.web[-1]", err: "the index must be a number"},
		{in: "services.", err: "no name"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			a, err := Parse(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse(%q) = %+v, %v; want error %q", tc.in, a, err, tc.err)
				}
				if AdapterName(tc.in) != tc.in {
					t.Fatalf("AdapterName(%q) = %q, want it unchanged", tc.in, AdapterName(tc.in))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.String() != tc.in {
				t.Fatalf("String() = %q, want %q", a.String(), tc.in)
			}
			if a.AdapterName() != tc.adapter || AdapterName(tc.in) != tc.adapter {
				t.Fatalf("AdapterName = %q, want %q", a.AdapterName(), tc.adapter)
			}
		})
	}
	if Service("web", 1, 2) != "services.web[1]" || Service("web", 0, 1) != "services.web" ||
		Network("n") != "networks.n" || Resource("r") != "resources.r" {
		t.Fatal("formatting")
	}
}
