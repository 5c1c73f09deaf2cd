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

const failingApp = `
payloads:
  db:
    runtime: vm
    params:
      image_hash: "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
networks:
  default:
    ip: "10.77.0.0/24"
services:
  db:
    payload: db
    network: default
    ip: ["10.77.0.9"]
    init:
      - run:
          args: ["/bin/sh", "-c", "echo starting; echo the-database-refuses >&2; exit 3"]
`

// TestInitFailure: a failing init command fails the resource with its
// stderr, the rental is undone (no agreement left running), and destroy
// cleans up the rest. (The provider that failed is reported in the failing
// action's identity, which the engine drops today: see docs/golem.md.)
func TestInitFailure(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(failingApp), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := e.gcompose(ctx, "deploy", "-f", desc, "--yes")
	if err == nil {
		t.Fatalf("deploy succeeded:\n%s", out)
	}
	if !strings.Contains(out, "the-database-refuses") || !strings.Contains(out, "init[0]") {
		t.Fatalf("the failure does not show the command's stderr:\n%s", out)
	}
	if s := e.summary(ctx); s.Agreements != 0 || s.Activities != 0 {
		t.Fatalf("a failed create left a rental: %+v", s)
	}
	// A second try fails the same way (and is asked again, not skipped).
	if out, err := e.gcompose(ctx, "deploy", "-f", desc, "--yes"); err == nil || !strings.Contains(out, "the-database-refuses") {
		t.Fatalf("second deploy: %v\n%s", err, out)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Allocations != 0 || s.Networks != 0 || s.Agreements != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}
