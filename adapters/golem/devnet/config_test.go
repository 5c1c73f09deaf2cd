package devnet

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	c, err := LoadConfig("devnet.yaml")
	if err != nil {
		t.Fatalf("LoadConfig(devnet.yaml): %v", err)
	}
	if c.Instance != "compose" || c.DebitNoteInterval.Duration != time.Minute || len(c.Providers) != 6 || c.Providers[1].Count != 30 || len(c.Providers[3].PriceStep) != 3 || c.Providers[5].Subnet != "edge" {
		t.Errorf("config %+v", c)
	}
	d, err := c.withDefaults()
	if err != nil || d.Providers[0].Runtime != "vm" || d.Providers[0].MaxAgreements != 1 || len(d.Identity) != 42 {
		t.Errorf("withDefaults = %+v, %v", d, err)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("providerz: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(bad); err == nil {
		t.Errorf("unknown field accepted")
	}
	for _, tc := range []struct {
		cfg  Config
		fail bool
	}{
		{Config{Instance: "bad name"}, true},
		{Config{Providers: []ProviderConfig{{Coeffs: []float64{1}}}}, true},
		{Config{Providers: []ProviderConfig{{PriceStep: []float64{1}}}}, true},
		{Config{Labels: map[string]string{"gcompose.devnet": "x"}}, true},
		{Config{}, false},
	} {
		if _, err := tc.cfg.withDefaults(); (err != nil) != tc.fail {
			t.Errorf("withDefaults(%+v) error %v, want failure %v", tc.cfg, err, tc.fail)
		}
	}
}

func TestDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"1.5s": 1500 * time.Millisecond, "2": 2 * time.Second, "": 0, "250ms": 250 * time.Millisecond} {
		var d Duration
		if err := d.parse(in); err != nil || d.Duration != want {
			t.Errorf("parse(%q) = %v, %v; want %v", in, d.Duration, err, want)
		}
	}
	var d Duration
	if err := d.parse("soon"); err == nil {
		t.Errorf("parse(soon) accepted")
	}
}

func TestImageHash(t *testing.T) {
	h := "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
	for in, ok := range map[string]bool{
		"hash:sha3:" + h + ":http://registry.golem.network/x.gvmi": true,
		"hash://sha3:" + h + ":http://x":                           true,
		"hash:sha3:1234:http://x":                                  false,
		"":                                                         false,
	} {
		got, err := imageHash(in)
		if (err == nil) != ok || (ok && got != h) {
			t.Errorf("imageHash(%q) = %q, %v", in, got, err)
		}
	}
}

func TestParseNetwork(t *testing.T) {
	for _, tc := range []struct{ ip, mask, want string }{
		{"192.168.0.0", "255.255.255.0", "192.168.0.0/24"},
		{"192.168.0.1/24", "", "192.168.0.0/24"},
		{"10.1.0.0", "255.255.0.0", "10.1.0.0/16"},
		{"10.1.0.0", "", "10.1.0.0/24"},
		{"10.1.0.0", "255.0.255.0", ""},
		{"nope", "", ""},
		{"10.0.0.0", "255.255.255.254", ""},
	} {
		p, err := parseNetwork(tc.ip, tc.mask)
		if tc.want == "" {
			if err == nil {
				t.Errorf("parseNetwork(%q, %q) = %v, want an error", tc.ip, tc.mask, p)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("parseNetwork(%q, %q) = %v, %v; want %s", tc.ip, tc.mask, p, err, tc.want)
		}
	}
	p, _ := parseNetwork("192.168.0.0/24", "")
	if g := lastHost(p); g.String() != "192.168.0.254" {
		t.Errorf("lastHost = %s", g)
	}
}

func TestAmounts(t *testing.T) {
	a, _ := parseAmount("0.1")
	b, _ := parseAmount("0.2")
	if s := a.add(b).String(); s != "0.3" {
		t.Errorf("0.1+0.2 = %s", s)
	}
	if _, err := parseAmount("-1"); err == nil {
		t.Errorf("negative amount accepted")
	}
	if _, err := parseAmount("x"); err == nil {
		t.Errorf("non-number accepted")
	}
}

func TestTaskPackageOf(t *testing.T) {
	h := "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
	manifest := base64.StdEncoding.EncodeToString([]byte(`{"version":"0.1.0","payload":[{"platform":{"arch":"x86_64","os":"linux"},"urls":["http://x/y.gvmi"],"hash":"sha3:` + h + `"}]}`))
	for _, props := range []map[string]any{
		{"golem.srv.comp.task_package": "hash:sha3:" + h + ":http://x/y.gvmi"},
		{"golem.srv.comp.payload": manifest},
	} {
		if got, err := imageHash(taskPackageOf(props, true)); err != nil || got != h {
			t.Errorf("image hash of %v = %q, %v", props, got, err)
		}
	}
}
