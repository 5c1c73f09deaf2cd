package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestSIGTERMRemovesItsNetwork runs the devnet binary, makes it create a VPN (a Docker network), stops it
// with SIGTERM and checks that the network is gone and that the app key never reached the logs.
func TestSIGTERMRemovesItsNetwork(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testimage.Binary(t, ctx, "./cmd/devnet")
	const key = "sigterm-test-key-5f2a"
	instance := "test-sigterm-cmd"
	cfg := filepath.Join(t.TempDir(), "devnet.yaml")
	if err := os.WriteFile(cfg, []byte("instance: "+instance+"\nlabels:\n  gcompose.test: "+t.Name()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The devnet picks its port (no port picked here and closed, which
	// another process could take before the devnet listens) and says
	// which in its log.
	cmd := exec.CommandContext(ctx, bin, "-listen", "127.0.0.1:0", "-config", cfg, "-self-container", "none")
	cmd.Env = append(os.Environ(), "YAGNA_APPKEY="+key)
	var logs syncwriter.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	addr := listenAddr(t, &logs)
	post := func() (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/net-api/v1/net", strings.NewReader(`{"ip":"10.213.60.0","mask":"255.255.255.0"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	status, err := post()
	if status != http.StatusOK {
		t.Fatalf("createNetwork: %d %v\n%s", status, err, logs.String())
	}
	f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance))
	// A VPN is a macvlan network and its anchor bridge (adapters/golem/devnet
	// doc.go): how many does not matter here, only that SIGTERM removes them.
	if ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil || len(ns) == 0 {
		t.Fatalf("networks while running: %d, %v", len(ns), err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("devnet exit: %v\n%s", err, logs.String())
	}
	if ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil || len(ns) != 0 {
		t.Errorf("networks after SIGTERM: %d, %v", len(ns), err)
	}
	if strings.Contains(logs.String(), key) {
		t.Errorf("the app key appears in the logs")
	}
}

// servingAt matches the devnet's log line that says where it serves.
var servingAt = regexp.MustCompile(`msg="devnet serving the yagna API" addr=(\S+)`)

// listenAddr waits until the devnet's log says where it serves.
func listenAddr(t *testing.T, logs *syncwriter.Buffer) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := servingAt.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("the devnet did not say where it serves within a minute:\n%s", logs.String())
	return ""
}

// An engine timeout of zero or below is refused at once, naming the flag,
// rather than quietly replaced by the default.
func TestEngineTimeoutMustBePositive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testimage.Binary(t, ctx, "./cmd/devnet")
	for _, v := range []string{"0", "-5s"} {
		// A devnet that accepted the value would run until killed.
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		cmd := exec.CommandContext(rctx, bin, "-engine-timeout", v, "-listen", "127.0.0.1:0", "-self-container", "none")
		cmd.Env = append(os.Environ(), "YAGNA_APPKEY=unused")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "-engine-timeout") || !strings.Contains(string(out), "want a duration above zero") {
			t.Errorf("-engine-timeout %s: %v\n%s", v, err, out)
		}
	}
}
