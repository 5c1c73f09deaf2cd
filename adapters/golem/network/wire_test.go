package network

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestSameRangeReadsYagnaForms: yagna answers a VPN's range in CIDR form
// ("192.168.0.0/24": core/vpn/src/network.rs create_network, an smoltcp
// IpCidr); comparing that text with the descriptor's network address
// ("192.168.0.0") planned a rebuild on every deploy. Fails on the old
// comparison (cur.IP != r.IP()).
func TestSameRangeReadsYagnaForms(t *testing.T) {
	r, err := ParseRange("192.168.0.0/24", "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cur     yagna.Network
		gateway string
		same    bool
	}{
		{"yagna CIDR", yagna.Network{ID: "n", IP: "192.168.0.0/24", Mask: "255.255.255.0", Gateway: "192.168.0.1"}, "", true},
		{"yagna CIDR, gateway asked", yagna.Network{ID: "n", IP: "192.168.0.0/24", Mask: "255.255.255.0", Gateway: "192.168.0.1"}, "192.168.0.1", true},
		{"bare and mask", yagna.Network{ID: "n", IP: "192.168.0.0", Mask: "255.255.255.0"}, "", true},
		{"other prefix", yagna.Network{ID: "n", IP: "192.168.0.0/25", Mask: "255.255.255.128"}, "", false},
		{"other range", yagna.Network{ID: "n", IP: "192.168.1.0/24", Mask: "255.255.255.0"}, "", false},
		{"other gateway", yagna.Network{ID: "n", IP: "192.168.0.0/24", Mask: "255.255.255.0", Gateway: "192.168.0.1"}, "192.168.0.254", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have, same, err := sameRange(tc.cur, r, tc.gateway)
			if err != nil || same != tc.same {
				t.Errorf("sameRange(%+v) = %s %v, %v; want same=%v", tc.cur, have, same, err, tc.same)
			}
		})
	}
}

// TestOwnerIPReadsCIDR: GET /net/{id}/addresses answers the requestor's
// addresses with the prefix ("192.168.0.1/24": Handler<GetAddresses>); the
// owner address is reported bare. Fails on the old code, which compared
// "192.168.0.1/24" with "192.168.0.1" and reported the CIDR text.
func TestOwnerIPReadsCIDR(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"ip":"192.168.0.1/24"},{"ip":"192.168.0.7/24"}]`))
	}))
	defer srv.Close()
	yc := yagna.New(srv.URL, "k")
	for _, tc := range []struct{ owner, want string }{{"", "192.168.0.1"}, {"192.168.0.7", "192.168.0.7"}, {"192.168.0.9", "192.168.0.1"}} {
		r, err := ParseRange("192.168.0.0/24", "", tc.owner)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ownerIP(context.Background(), yc, "n", r)
		if err != nil || got != tc.want {
			t.Errorf("ownerIP(owner %q) = %q, %v; want %q", tc.owner, got, err, tc.want)
		}
	}
}
