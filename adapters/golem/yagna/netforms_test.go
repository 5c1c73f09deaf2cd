package yagna_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestBareIPAndNetworkIP: yagna answers ranges and the requestor's addresses
// in CIDR form (core/vpn/src/network.rs), nodes bare; both forms are read.
func TestBareIPAndNetworkIP(t *testing.T) {
	for in, want := range map[string]string{"192.168.0.1/24": "192.168.0.1", "192.168.0.2": "192.168.0.2", " 10.0.0.3/16 ": "10.0.0.3", "junk": "junk"} {
		if got := yagna.BareIP(in); got != want {
			t.Errorf("BareIP(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct{ ip, mask, want, err string }{
		{ip: "192.168.0.0/24", mask: "255.255.255.0", want: "192.168.0.0/24"},
		{ip: "10.0.0.0/16", want: "10.0.0.0/16"},
		{ip: "192.168.0.0", mask: "255.255.255.128", want: "192.168.0.0/25"},
		{ip: "192.168.0.0", want: "192.168.0.0/24"},
		{ip: "192.168.0.0", mask: "255.0.255.0", err: "not contiguous"},
		{ip: "nope", err: "VPN ip"},
	} {
		p, err := yagna.ParseNetworkIP(tc.ip, tc.mask)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseNetworkIP(%q, %q) = %s, %v; want error %q", tc.ip, tc.mask, p, err, tc.err)
			}
			continue
		}
		if err != nil || p.String() != tc.want {
			t.Errorf("ParseNetworkIP(%q, %q) = %s, %v; want %s", tc.ip, tc.mask, p, err, tc.want)
		}
	}
}

// TestNetForbiddenIsGone: yagna answers 403 with an empty body for a VPN the
// identity does not own while it owns others (core/vpn/src/network.rs
// VpnSupervisor::owner); the client reports it as not found (the network
// adapter's destroy exited 1 "reading VPN …: 403: Forbidden" on the old code),
// naming the 403. AddAddress and AddNode send bare addresses.
func TestNetForbiddenIsGone(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			bodies = append(bodies, string(b))
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "null")
			return
		}
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	c := yagna.New(srv.URL, "k")
	ctx := context.Background()
	_, err := c.GetNetwork(ctx, "n1")
	if !yagna.IsNotFound(err) || !strings.Contains(err.Error(), "403") {
		t.Errorf("GetNetwork on 403 = %v, want IsNotFound naming 403", err)
	}
	if err := c.DeleteNetwork(ctx, "n1"); !yagna.IsNotFound(err) {
		t.Errorf("DeleteNetwork on 403 = %v, want IsNotFound", err)
	}
	if _, err := c.Networks(ctx); yagna.StatusOf(err) != http.StatusForbidden {
		t.Errorf("Networks on 403 = %v, want the 403 as is", err)
	}
	if err := c.AddAddress(ctx, "n1", "192.168.0.7/24"); err != nil {
		t.Errorf("AddAddress: %v", err)
	}
	if err := c.AddNode(ctx, "n1", yagna.Node{ID: "0xp", IP: "192.168.0.2/24"}); err != nil {
		t.Errorf("AddNode: %v", err)
	}
	if want := []string{`{"ip":"192.168.0.7"}`, `{"id":"0xp","ip":"192.168.0.2"}`}; strings.Join(bodies, " ") != strings.Join(want, " ") {
		t.Errorf("bodies sent = %q, want %q", bodies, want)
	}
}
