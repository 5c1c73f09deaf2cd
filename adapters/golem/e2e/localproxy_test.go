package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

const localProxyApp = `
payloads:
  db-server:
    runtime: vm
    params:
      image_hash: "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
  web-server:
    runtime: vm
    params:
      image_hash: "6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b"
  local-proxy:
    runtime: local-http-proxy
networks:
  default:
    ip: "10.78.0.1/24"
services:
  db-service:
    payload: db-server
    network: default
    init:
      - run:
          args: ["/bin/sh", "-c", "/devnet-db -listen :4001 > /tmp/db.out 2> /tmp/db.err &"]
  web-service:
    payload: web-server
    network: default
    init:
      - run:
          args: ["/devnet-web", "--db-address", "${services.db-service.network_node.ip}", "initdb"]
      - run:
          args: ["/bin/sh", "-c", "/devnet-web --db-address ${services.db-service.network_node.ip} run > /tmp/web.out 2>&1 &"]
  proxy:
    payload: local-proxy
    depends_on: [web-service]
    http_proxy:
      ports: ["80"]
`

// TestLocalHTTPProxyRuntime: a service with GAP-16's local-http-proxy
// runtime is not rented; it is a local proxy in front of the service it
// depends on, and its outputs carry the URL.
func TestLocalHTTPProxyRuntime(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(localProxyApp), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 2 {
		t.Fatalf("want db and web rented, not the proxy: %+v", s)
	}
	url := e.field(ctx, "services.proxy", "url")
	body, err := getWithin(ctx, url, 20)
	if err != nil || !strings.Contains(body, "records read back from the database") {
		t.Fatalf("page through the local-http-proxy service at %s: %v\n%s", url, err, body)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Allocations != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
