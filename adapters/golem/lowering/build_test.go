package lowering

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/payloadbuild"
)

// TestBuildBecomesTheContextHash: a payload's build: reaches the service adapter as the hash of its
// context (params.image_hash), never as a folder; a changed file changes the hash of the services of that
// payload only, which the plan shows as their rebuild.
func TestBuildBecomesTheContextHash(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"counter", "front"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "Dockerfile"), []byte("FROM scratch\nCOPY "+d+" /"+d+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, d), []byte(d+" v1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	desc := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(`payloads:
  counter: {runtime: vm, build: ./counter, capabilities: [start-entrypoint]}
  front: {runtime: vm, build: front, params: {max_cpu_per_hour: 2}}
networks:
  default: {ip: 10.80.0.1/24}
services:
  counter: {payload: counter, network: default}
  front: {payload: front, network: default}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	lowered := func() (counter, front map[string]any) {
		res, err := Resources(load(t, desc), Images{})
		if err != nil {
			t.Fatal(err)
		}
		return res["services.counter"].Config["payload"].(map[string]any), res["services.front"].Config["payload"].(map[string]any)
	}
	c1, f1 := lowered()
	want, err := payloadbuild.Hash(filepath.Join(dir, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []map[string]any{c1, f1} {
		if _, ok := p["build"]; ok {
			t.Errorf("the adapter got the build folder: %v", p)
		}
	}
	if got := c1["params"].(map[string]any)["image_hash"]; got != want || len(want) != 56 {
		t.Errorf("counter's image_hash %v, want the context hash %s", got, want)
	}
	if f1["params"].(map[string]any)["max_cpu_per_hour"] == nil {
		t.Errorf("front's own params were lost: %v", f1)
	}
	if err := os.WriteFile(filepath.Join(dir, "front", "front"), []byte("front v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	c2, f2 := lowered()
	if c2["params"].(map[string]any)["image_hash"] != c1["params"].(map[string]any)["image_hash"] {
		t.Errorf("counter's hash changed with front's source")
	}
	if f2["params"].(map[string]any)["image_hash"] == f1["params"].(map[string]any)["image_hash"] {
		t.Errorf("front's hash did not change with its source")
	}
}
