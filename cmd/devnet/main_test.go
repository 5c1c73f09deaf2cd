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

// TestSIGTERMRemovesWhatItMade runs the devnet binary, makes it create a VPN (no Docker network: its
// packets go through the devnet's socket in -vpn-dir), stops it with SIGTERM and checks that the socket is
// gone, that no network was ever made and that the app key never reached the logs.
func TestSIGTERMRemovesWhatItMade(t *testing.T) {
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
	vpnDir := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, "-listen", "127.0.0.1:0", "-config", cfg, "-self-container", "none", "-vpn-dir", vpnDir)
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
	if ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil || len(ns) != 0 {
		t.Fatalf("networks while running: %d, %v; want none", len(ns), err)
	}
	if socks, _ := filepath.Glob(filepath.Join(vpnDir, "*.sock")); len(socks) != 1 {
		t.Fatalf("VPN sockets in %s while running: %q, want one", vpnDir, socks)
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
	if socks, _ := filepath.Glob(filepath.Join(vpnDir, "*.sock")); len(socks) != 0 {
		t.Errorf("VPN sockets in %s after SIGTERM: %q", vpnDir, socks)
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

// TestSIGKILLMidVPNCreateLeavesNoNetwork kills a devnet (SIGKILL) while it creates a VPN, as soon as the
// first of the VPN's Docker networks exists, then starts and stops a devnet of another instance: what the
// killed devnet created must be gone then, though its own instance never starts again.
func TestSIGKILLMidVPNCreateLeavesNoNetwork(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testimage.Binary(t, ctx, "./cmd/devnet")
	const key = "sigkill-test-key"
	instance := "test-sigkill-cmd"
	cfg := filepath.Join(t.TempDir(), "devnet.yaml")
	other := filepath.Join(t.TempDir(), "other.yaml")
	for path, inst := range map[string]string{cfg: instance, other: instance + "-other"} {
		if err := os.WriteFile(path, []byte("instance: "+inst+"\nlabels:\n  gcompose.test: "+t.Name()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance))
	networks := func() []string {
		ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f})
		if err != nil {
			t.Fatalf("listing networks: %v", err)
		}
		var names []string
		for _, n := range ns {
			names = append(names, n.Name)
		}
		return names
	}
	defer func() {
		for _, n := range networks() {
			_ = docker.NetworkRemove(ctx, n)
		}
	}()
	run := func(cfg string) (*exec.Cmd, *syncwriter.Buffer, string) {
		cmd := exec.CommandContext(ctx, bin, "-listen", "127.0.0.1:0", "-config", cfg, "-self-container", "none")
		cmd.Env = append(os.Environ(), "YAGNA_APPKEY="+key)
		var logs syncwriter.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, &logs, listenAddr(t, &logs)
	}
	cmd, logs, addr := run(cfg)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/net-api/v1/net", strings.NewReader(`{"ip":"10.213.61.0","mask":"255.255.255.0"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for len(networks()) == 0 {
		if ctx.Err() != nil {
			t.Fatalf("no network of the VPN appeared:\n%s", logs.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	time.Sleep(time.Second) // what dockerd was doing for it finishes
	killed := networks()
	t.Logf("left by the killed devnet: %v", killed)
	if len(killed) == 0 {
		t.Fatalf("the killed devnet left nothing to remove: the test proves nothing")
	}

	cmd, logs, _ = run(other)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("devnet exit: %v\n%s", err, logs.String())
	}
	if left := networks(); len(left) != 0 {
		t.Errorf("networks of the devnet killed mid-create after another devnet started and stopped: %v\n%s", left, logs.String())
	}
}
