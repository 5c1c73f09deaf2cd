package devnet

import (
	"path/filepath"
	"testing"
)

// The market users are pointed at (GCOMPOSE_DEVNET_CONFIG=examples/devnet/market.yaml make devnet) loads, passes
// the devnet's checks and has the providers its comments promise.
func TestExampleMarketConfig(t *testing.T) {
	c, err := LoadConfig(filepath.Join("..", "..", "..", "examples", "devnet", "market.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.withDefaults()
	if err != nil {
		t.Fatalf("examples/devnet/market.yaml: %v", err)
	}
	count := map[string]int{}
	for _, p := range d.Providers {
		count[p.Name] += p.Count * p.MaxAgreements
	}
	want := map[string]int{"cheap": 10, "big": 4, "shared": 4, "dear": 2, "edge": 2}
	for name, n := range want {
		if count[name] != n {
			t.Errorf("provider %s takes %d agreements, want %d", name, count[name], n)
		}
	}
}
