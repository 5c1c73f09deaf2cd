package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/testimage"
)

// The hashes the shell-less payload images answer for on the test's devnet (Config.Images).
const (
	counterHash = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"
	frontHash   = "f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0"
)

// The counter and its front page, each a FROM scratch image of one static binary whose ENTRYPOINT is
// the server: started by start-entrypoint, joined to the VPN, the front reaches the counter across it
// and the local proxy reaches the front. The front learns the counter's address from an init command
// that runs the image's own binary (no shell to run it with).
const shellLessApp = `
payloads:
  counter:
    runtime: vm
    capabilities: [start-entrypoint]
    params:
      image_hash: "` + counterHash + `"
  front:
    runtime: vm
    capabilities: [start-entrypoint]
    params:
      image_hash: "` + frontHash + `"
  local-proxy:
    runtime: local-http-proxy
networks:
  default:
    ip: "10.79.0.1/24"
services:
  counter:
    payload: counter
    network: default
  front:
    payload: front
    network: default
    init:
      - run:
          args: ["/payloadapp", "set-counter", "${services.counter.network_node.ip}"]
  proxy:
    payload: local-proxy
    depends_on: [front]
    http_proxy:
      ports: ["80"]
`

// shellLessImages builds the counter and front images: testdata/payloadapp alone in a FROM scratch
// image, with the server as ENTRYPOINT.
func shellLessImages(t *testing.T) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	base := testimage.Image(t, ctx, "./adapters/golem/e2e/testdata/payloadapp", "gcompose-test/payloadapp:e2e")
	return map[string]string{
		counterHash: testimage.DerivedImage(t, ctx, "FROM "+base+"\nENTRYPOINT [\"/payloadapp\", \"counter\"]\n", "gcompose-test/payloadapp-counter:e2e"),
		frontHash:   testimage.DerivedImage(t, ctx, "FROM "+base+"\nENTRYPOINT [\"/payloadapp\", \"front\"]\n", "gcompose-test/payloadapp-front:e2e"),
	}
}

// TestShellLessPayloadWithItsEntrypoint: any image runs as a payload. The images have no shell, no ip,
// no init; the devnet joins them to the VPN and starts their entrypoint as ya-runtime-vm does for a
// payload that asks for start-entrypoint. On the devnet that exec'd /bin/sh in the payload to join the
// VPN, the start failed ("exec: /bin/sh: no such file").
func TestShellLessPayloadWithItsEntrypoint(t *testing.T) {
	parallel(t)
	caps := []string{"vpn", "inet", "manifest-support", "start-entrypoint"}
	e := start(t, devnet.Config{Images: shellLessImages(t), Providers: []devnet.ProviderConfig{
		{Name: "vm", Count: 3, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(shellLessApp), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e.must(ctx, "deploy", "-f", desc, "--yes")
	if !strings.Contains(out, "counter at 10.79.0.") {
		t.Errorf("the front's init (its own binary) did not report the counter's VPN address:\n%s", out)
	}
	if s := e.summary(ctx); s.Agreements != 2 {
		t.Fatalf("want counter and front rented: %+v", s)
	}
	url := e.field(ctx, "services.proxy", "url")
	body, err := getWithin(ctx, url, 40)
	if err != nil || body != "visit 1\n" {
		t.Fatalf("front page through the proxy at %s: want \"visit 1\", got %v %q", url, err, body)
	}
	if body, err = get(ctx, url); err != nil || body != "visit 2\n" {
		t.Fatalf("second visit: want \"visit 2\", got %v %q", err, body)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
