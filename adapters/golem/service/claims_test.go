package service

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/network"
)

func providersOf(offers []Offer) []string {
	var out []string
	for _, o := range offers {
		out = append(out, o.Provider)
	}
	return out
}

// Concurrent creates counter the best provider no other create negotiates
// with, and never one another create took; a create that is done frees
// what it took.
func TestClaimsSpreadCreatesOverProviders(t *testing.T) {
	ranked := []Offer{{Provider: "a", Cost: 1}, {Provider: "b", Cost: 1}, {Provider: "c", Cost: 2}, {Provider: "d", Cost: 3}}
	c := &claims{}
	one, two, three := c.claimer("y", "s1"), c.claimer("y", "s2"), c.claimer("y", "s3")
	if got := providersOf(one.spread(ranked)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("without claims the order is the ranking's: %v", got)
	}
	one.counter("a")
	one.counter("b")
	if got := providersOf(two.spread(ranked)); !slices.Equal(got, []string{"c", "d", "a", "b"}) {
		t.Errorf("a second create counters the providers the first does not first: %v", got)
	}
	if got := providersOf(one.spread(ranked)); !slices.Equal(got, []string{"c", "d", "a", "b"}) {
		// Its own counters count too: it counters each provider once.
		t.Errorf("spread for the create that counters: %v", got)
	}
	if ok, _ := one.take("a"); !ok {
		t.Fatal("a free provider could not be taken")
	}
	if ok, who := two.take("a"); ok || who != "s1" {
		t.Errorf("a provider taken by s1 was taken again (%v, %q)", ok, who)
	}
	if who := two.takenBy("a"); who != "s1" {
		t.Errorf("takenBy a = %q, want s1", who)
	}
	if who := one.takenBy("a"); who != "" {
		t.Errorf("a create's own take is reported as another's: %q", who)
	}
	two.counter("c")
	if got := providersOf(three.spread(ranked)); !slices.Equal(got, []string{"d", "b", "c", "a"}) {
		t.Errorf("a third create: the free one, then the countered ones, the taken one last: %v", got)
	}
	one.uncounter("a")
	one.uncounter("b")
	one.done()
	if who := two.takenBy("a"); who != "" {
		t.Errorf("a is still taken by %q after its create is done", who)
	}
	if got := providersOf(three.spread(ranked)); !slices.Equal(got, []string{"a", "b", "d", "c"}) {
		t.Errorf("after the first create is done: %v", got)
	}
	// Another yagna's provider of the same id is another provider.
	if ok, _ := c.claimer("z", "s4").take("c"); !ok {
		t.Error("a provider of another yagna was refused")
	}
	// No claims (nil): every provider free.
	var none *claimer
	if ok, _ := none.take("a"); !ok || none.takenBy("a") != "" || len(none.spread(ranked)) != 4 {
		t.Error("a nil claimer claimed something")
	}
	none.done()
}

// Concurrent joins of one adapter pick distinct addresses of a VPN without
// planned addresses: each pick sees what the others picked and reserved.
func TestClaimsPickDistinctAddresses(t *testing.T) {
	rg, err := network.ParseRange("192.168.9.0", "255.255.255.0", "")
	if err != nil {
		t.Fatal(err)
	}
	used := []string{"192.168.9.1"} // the requestor's
	c := &claims{}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	for i := range 20 {
		h := c.claimer("y", fmt.Sprintf("s%d", i))
		wg.Go(func() {
			ip, err := h.pickIP("net", func(others []string) (string, error) {
				return network.PickIP(rg, "", append(slices.Clone(used), others...), nil)
			})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, ok := got[ip]; ok {
				t.Errorf("%s picked by %s and %s", ip, other, h.me.name)
			}
			got[ip] = h.me.name
		})
	}
	wg.Wait()
	if len(got) != 20 {
		t.Fatalf("%d addresses for 20 joins", len(got))
	}
	for ip := range got {
		if a := netip.MustParseAddr(ip); !rg.Prefix.Contains(a) || ip == "192.168.9.1" {
			t.Errorf("picked %s", ip)
		}
	}
	// An address released (unreserve: taken in yagna by a node the adapter
	// does not know) or a create done frees it for the next pick.
	h, other := c.claimer("y", "a"), c.claimer("y", "b")
	ip, _ := h.pickIP("net2", func(others []string) (string, error) { return network.PickIP(rg, "", used, nil) })
	pick := func() string {
		got, _ := other.pickIP("net2", func(others []string) (string, error) {
			return network.PickIP(rg, "", append(slices.Clone(used), others...), nil)
		})
		return got
	}
	if next := pick(); next == ip {
		t.Errorf("%s picked twice", ip)
	} else {
		other.unreserve("net2", next)
	}
	h.done()
	if next := pick(); next != ip {
		t.Errorf("after the holder is done the first free address is %s, want %s", next, ip)
	}
}
