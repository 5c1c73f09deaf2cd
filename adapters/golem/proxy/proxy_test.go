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
