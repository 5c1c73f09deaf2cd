package service

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestUsedIPsExcludeTheRequestor: yagna lists the requestor's addresses with
// the prefix ("192.168.0.1/24": core/vpn/src/network.rs Handler<GetAddresses>)
// and gives it the first host at creation; the provider must not be put there.
// On the old code "192.168.0.1/24" did not parse as an address, so the
// requestor's addresses were not excluded (run against the old usedIPs, the
// provider got 192.168.0.2, an address the requestor holds).
func TestUsedIPsExcludeTheRequestor(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/addresses"):
			_, _ = io.WriteString(w, `[{"ip":"192.168.0.1/24"},{"ip":"192.168.0.2/24"}]`)
		case strings.HasSuffix(r.URL.Path, "/nodes"):
			_, _ = io.WriteString(w, `[{"id":"0xp","ip":"192.168.0.3"}]`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	r := &rental{yc: yagna.New(srv.URL, "k")}
	n := yagna.Network{ID: "n", IP: "192.168.0.0/24", Mask: "255.255.255.0", Gateway: "192.168.0.1"}
	used, err := r.usedIPs(context.Background(), "n", n)
	if err != nil {
		t.Fatal(err)
	}
	rg, err := network.ParseRange(n.IP, n.Mask, "")
	if err != nil {
		t.Fatal(err)
	}
	ip, err := network.PickIP(rg, "", used, nil)
	if err != nil || ip != "192.168.0.4" {
		t.Errorf("PickIP with used %q = %q, %v; want 192.168.0.4 (.1 and .2 the requestor's, .3 a node's)", used, ip, err)
	}
}
