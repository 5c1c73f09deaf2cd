package proxy

import (
	"strings"
	"testing"
)

func TestParsePort(t *testing.T) {
	for _, tc := range []struct {
		in            string
		local, remote int
		err           bool
	}{
		{in: "80", local: 0, remote: 80},
		{in: "8080:80", local: 8080, remote: 80},
		{in: " 5000 ", local: 0, remote: 5000},
		{in: "0:80", local: 0, remote: 80},
		{in: "80:0", err: true},
		{in: "x", err: true},
		{in: "1:2:3", err: true},
		{in: "70000", err: true},
	} {
		l, r, err := ParsePort(tc.in)
		if (err != nil) != tc.err || (!tc.err && (l != tc.local || r != tc.remote)) {
			t.Errorf("ParsePort(%q) = %d, %d, %v", tc.in, l, r, err)
		}
	}
}

func TestMappingsAndFingerprint(t *testing.T) {
	c := Config{Service: "services.web", NetworkID: "n1", IP: "192.168.0.3", HTTP: []string{"80"}, TCP: []string{"4001:4001"}}
	m, err := c.Mappings()
	if err != nil || len(m) != 2 || m[0].Key() != "http:80" || m[1].Local != 4001 {
		t.Fatalf("Mappings = %+v, %v", m, err)
	}
	got, all := resolved(m, map[string]int{"http:80": 34567})
	if !all || got[0].Local != 34567 {
		t.Fatalf("resolved = %+v %v", got, all)
	}
	if _, all := resolved(m, nil); all {
		t.Fatal("an unchosen free port must not count as resolved")
	}
	moved := c
	moved.IP = "192.168.0.4"
	if fingerprint(c, got) == fingerprint(moved, got) {
		t.Fatal("the fingerprint must change with the target address")
	}
	c.HTTP = []string{"nope"}
	if _, err := c.Mappings(); err == nil || !strings.Contains(err.Error(), "http_proxy") {
		t.Fatalf("bad port: %v", err)
	}
}

func TestOutputsURL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		maps  []Mapping
		url   string
		ports []string
	}{
		{"http and tcp", []Mapping{{"tcp", 5432, 5432}, {"http", 34567, 80}}, "http://127.0.0.1:34567/", []string{"tcp://127.0.0.1:5432", "http://127.0.0.1:34567/"}},
		{"tcp only", []Mapping{{"tcp", 40001, 6379}, {"tcp", 40002, 6380}}, "tcp://127.0.0.1:40001", []string{"tcp://127.0.0.1:40001", "tcp://127.0.0.1:40002"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := outputs(tc.maps, "0123456789ab", "192.168.0.3", "services.db")
			if out["url"] != tc.url {
				t.Errorf("url = %v, want %s", out["url"], tc.url)
			}
			ports := out["ports"].([]any)
			for i, want := range tc.ports {
				if got := ports[i].(map[string]any)["url"]; got != want {
					t.Errorf("ports[%d].url = %v, want %s", i, got, want)
				}
			}
		})
	}
}
