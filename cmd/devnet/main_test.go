package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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

// TestGoneDevnetsNetworksRemoved: the VPN networks a devnet of two Docker networks per VPN left when it was
// killed (a macvlan network hung off an internal bridge, labelled with the instance and the process that
// made it, now gone) are removed by the next devnet of another instance, macvlan first, though the killed
// one's instance never starts again.
func TestGoneDevnetsNetworksRemoved(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testimage.Binary(t, ctx, "./cmd/devnet")
	const key = "sigkill-test-key"
	instance := "test-sigkill-cmd"
	other := filepath.Join(t.TempDir(), "other.yaml")
	if err := os.WriteFile(other, []byte("instance: "+instance+"-other\nlabels:\n  gcompose.test: "+t.Name()+"\n"), 0o644); err != nil {
		t.Fatal(err)
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
			_ = docker.NetworkRemove(context.Background(), n)
		}
	}()
	// The owner: a devnet process that has ended (devnet.go labelOwner: process:<pid ns>:<pid>:<start>).
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Skipf("no /proc: owners cannot be told: %v", err)
	}
	labels := map[string]string{"gcompose.devnet": instance, "gcompose.devnet.owner": fmt.Sprintf("process:%s:%d:1", ns, ended.Process.Pid), "gcompose.test": t.Name()}
	dev := "gcvk" + strconv.Itoa(os.Getpid())
	if _, err := docker.NetworkCreate(ctx, "gcompose-devnet-"+instance+"-x-anchor", network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels,
		Options: map[string]string{"com.docker.network.bridge.name": dev}}); err != nil {
		t.Fatal(err)
	}
	if _, err := docker.NetworkCreate(ctx, "gcompose-devnet-"+instance+"-x", network.CreateOptions{Driver: "macvlan", Labels: labels,
		Options: map[string]string{"parent": dev, "macvlan_mode": "bridge"}}); err != nil {
		t.Fatal(err)
	}

	cmd := exec.CommandContext(ctx, bin, "-listen", "127.0.0.1:0", "-config", other, "-self-container", "none")
	cmd.Env = append(os.Environ(), "YAGNA_APPKEY="+key)
	var logs syncwriter.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	listenAddr(t, &logs)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("devnet exit: %v\n%s", err, logs.String())
	}
	if left := networks(); len(left) != 0 {
		t.Errorf("networks of the gone devnet after another devnet started and stopped: %v\n%s", left, logs.String())
	}
}
