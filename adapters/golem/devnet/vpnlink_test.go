package devnet_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestWebappBesideAMasqueradedNetwork is the examples/webapp flow on the devnet as `make demo` runs it
// (in a container), while another Docker network has a range that overlaps the VPN's, as a busy Docker
// host has: once 172.17-31 are taken, Docker hands out 192.168.x.0/20 ranges, and 192.168.64.0/20 holds
// the demo's 192.168.77.0/24. The host masquerades such a network's range towards every other interface,
// and it filters bridged IPv4 (bridge-nf-call-iptables), so on a bridge the web node's connection to the
// db node left as coming from the bridge's gateway and never completed: web's initdb gave up after a
// minute with "context deadline exceeded". The nodes' packets go through the devnet's relay now
// (vpnrelay.go), in user space, where the host's netfilter never sees them.
func TestWebappBesideAMasqueradedNetwork(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx := ctxT(t, 8*time.Minute)
	prefix := masqueradedNetwork(t, ctx, docker)
	db, web := buildProviderImage(t, docker), buildWebImage(t, docker)
	url, _, _ := startInContainer(t, ctx, docker, fmt.Sprintf("images: {%s: %s, %s: %s}\nproviders: [{name: p, count: 2}]\n", dbHash, db, webHash, web))
	e := &env{t: t, url: url, c: yagna.New(url, testKey), docker: docker}
	me, err := e.c.Me(ctx)
	if err != nil {
		t.Fatal(err)
	}
	webappFlow(ctx, t, e, me.Identity, prefix)
}

// TestWebappBesideAMasqueradedNetworkOnTheHost is the same with the devnet run on the Docker host, as
// devnettest.Serve runs it for the e2e tests and as `go run ./cmd/devnet` does: there is no devnet
// container on the VPN's bridge, and the tunnel to the page still has to reach the web node.
func TestWebappBesideAMasqueradedNetworkOnTheHost(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx := ctxT(t, 8*time.Minute)
	prefix := masqueradedNetwork(t, ctx, docker)
	db, web := buildProviderImage(t, docker), buildWebImage(t, docker)
	e := start(t, devnet.Config{
		Images:    map[string]string{dbHash: db, webHash: web},
		Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}},
	})
	webappFlow(ctx, t, e, e.srv.Identity(), prefix)
}

// TestVPNsOfOneRangeStayApart: two VPNs on one range at once (two apps that chose the same range, as
// yagna allows) each serve their own nodes, and a node never reaches a node of the other VPN, even at an
// address its own VPN does not hold: the relay routes a packet within its VPN only (vpnrelay.go). Nor
// does anything leave a VPN: a node has no route off its range.
func TestVPNsOfOneRangeStayApart(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 4}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)
	var nets []yagna.Network
	for range 2 {
		n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.34.0", Mask: "255.255.255.0"})
		if err != nil {
			t.Fatalf("CreateNetwork: %v", err)
		}
		nets = append(nets, n)
	}
	node := func(n yagna.Network, ip string) string {
		neg := e.rent(ctx, taskPackage(testHash))
		t.Cleanup(func() {
			_ = e.c.TerminateAgreement(context.Background(), neg.agreement, yagna.TerminationReason("test over"))
			_ = e.c.ReleaseAllocation(context.Background(), neg.alloc.AllocationID)
		})
		if err := e.c.AddNode(ctx, n.ID, yagna.Node{ID: neg.providerID, IP: ip}); err != nil {
			t.Fatal(err)
		}
		act, err := e.c.CreateActivity(ctx, neg.agreement)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range e.exec(ctx, act.ActivityID,
			yagna.ExeScriptCommand{Deploy: &yagna.DeployCommand{Net: []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, NodeIP: ip}}}},
			yagna.ExeScriptCommand{Start: &yagna.StartCommand{}}) {
			if r.Result != yagna.ResultOk {
				t.Fatalf("node %s, command %d: %+v", ip, r.Index, r)
			}
		}
		return act.ActivityID
	}
	// try runs a script in a node: its output, and whether it exited 0.
	try := func(act, script string) (string, bool) {
		res := e.exec(ctx, act, run("/bin/sh", "-c", script))
		if len(res) != 1 {
			t.Fatalf("running %q: %+v", script, res)
		}
		return res[0].Stdout + res[0].Stderr, res[0].Result == yagna.ResultOk
	}
	// Each node answers a connection to port 5000 with its name.
	serve := func(act, name string) {
		if out, ok := try(act, `nc -ll -p 5000 -e /bin/echo `+name+` > /dev/null 2>&1 &`); !ok {
			t.Fatalf("starting %s's server: %s", name, out)
		}
	}
	a1, a2 := node(nets[0], "10.213.34.2"), node(nets[0], "10.213.34.3")
	b1, b2 := node(nets[1], "10.213.34.2"), node(nets[1], "10.213.34.4")
	for act, name := range map[string]string{a1: "a1", a2: "a2", b1: "b1", b2: "b2"} {
		serve(act, name)
	}
	ask := func(from, ip string) (string, bool) {
		out, ok := try(from, `timeout 3 nc -w 2 `+ip+` 5000 < /dev/null`)
		return strings.TrimSpace(out), ok
	}
	for _, c := range []struct {
		from, fromName, ip, want string
	}{
		{a2, "a2", "10.213.34.2", "a1"},
		{b2, "b2", "10.213.34.2", "b1"},
		{a1, "a1", "10.213.34.3", "a2"},
		{b1, "b1", "10.213.34.4", "b2"},
	} {
		var out string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if out, _ = ask(c.from, c.ip); out == c.want || time.Now().After(deadline) {
				break
			}
		}
		if out != c.want {
			t.Errorf("%s asked %s: %q, want %q", c.fromName, c.ip, out, c.want)
		}
	}
	// Across the VPNs: VPN A holds no .4, VPN B no .3; the other VPN's node there stays out of reach.
	if out, ok := ask(a1, "10.213.34.4"); ok || strings.Contains(out, "b2") {
		t.Errorf("a1 reached 10.213.34.4, which only VPN B holds: %q", out)
	}
	if out, ok := ask(b1, "10.213.34.3"); ok || strings.Contains(out, "a2") {
		t.Errorf("b1 reached 10.213.34.3, which only VPN A holds: %q", out)
	}
	// Nothing leaves a VPN: no route off its range.
	if out, ok := try(a1, `ip -4 route show; ip -4 route get 10.213.35.2`); ok || strings.Contains(out, "default") {
		t.Errorf("a1 has a route off its VPN's range: %q", out)
	}
	// The requestor's tunnels reach each VPN's own node at the shared address.
	for i, want := range []string{"a1", "b1"} {
		conn, err := e.c.DialTCPConn(ctx, nets[i].ID, "10.213.34.2", 5000)
		if err != nil {
			t.Fatalf("tunnel to VPN %d's 10.213.34.2: %v", i, err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		got, err := bufio.NewReader(conn).ReadString('\n')
		_ = conn.Close()
		if strings.TrimSpace(got) != want {
			t.Errorf("tunnel to VPN %d's 10.213.34.2 read %q (%v), want %q", i, got, err, want)
		}
	}
}

// masqueradedNetwork creates a Docker network with masquerading on (Docker's default) on a range of the
// test's own, the first /24 of 10.213.41-60 that no other Docker network holds (the masqueraded network
// would break a VPN on that range of any devnet with a bridged datapath), removed when the test ends. It
// returns the range's first three bytes.
func masqueradedNetwork(t *testing.T, ctx context.Context, docker *client.Client) string {
	t.Helper()
	labels := testimage.Labels(t)
	masq := "gcompose-test-masquerade-" + strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-"))
	var prefix string
	for i := 41; prefix == "" && i <= 60; i++ {
		p := fmt.Sprintf("10.213.%d", i)
		_, err := docker.NetworkCreate(ctx, masq, network.CreateOptions{Labels: labels,
			IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: p + ".0/24"}}}})
		switch {
		case err == nil:
			prefix = p
		case !strings.Contains(err.Error(), "overlaps") || i == 60:
			t.Fatalf("creating the masqueraded network %s on %s.0/24: %v", masq, p, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := docker.NetworkRemove(ctx, masq); err != nil {
			t.Errorf("removing %s: %v", masq, err)
		}
	})
	return prefix
}

// startInContainer runs the devnet as `make demo` and the doc test do: built from ./cmd/devnet, in a
// container on a network of its own named after the instance (as compose names it), with the engine's
// socket, its API published on a loopback port, and configYAML (plus the test's labels) as its
// configuration. It returns the API's URL, the instance and the container's id. When the test ends the devnet gets SIGTERM,
// and no network of its instance may be left.
func startInContainer(t *testing.T, ctx context.Context, docker *client.Client, configYAML string) (url, instance, id string) {
	t.Helper()
	image := testimage.DockerfileImage(t, ctx, testimage.Dockerfile{Path: "images/devnet.Dockerfile", Mains: []string{"./cmd/devnet", "./cmd/devnet-init"}}, "gcompose/devnet:test")
	instance = "test-" + strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-")) // sorts after "gcompose-devnet-"
	labels := testimage.Labels(t)
	cfg := filepath.Join(t.TempDir(), "devnet.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("labels:\n  gcompose.test: %q\n%s", labels["gcompose.test"], configYAML)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := docker.NetworkCreate(ctx, instance, network.CreateOptions{Labels: labels}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = docker.NetworkRemove(ctx, instance)
	})
	// The VPN relay's socket directory, shared with the payload containers, as docker-compose.yml shares it.
	vol, err := docker.VolumeCreate(ctx, volume.CreateOptions{Name: instance + "-vpn", Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := docker.VolumeRemove(ctx, vol.Name, true); err != nil {
			t.Errorf("removing volume %s: %v", vol.Name, err)
		}
	})
	port := nat.Port("7465/tcp")
	c, err := docker.ContainerCreate(ctx,
		&container.Config{Image: image, Cmd: []string{"-listen", ":7465", "-config", "/devnet.yaml"}, Labels: labels,
			Env: []string{"YAGNA_APPKEY=" + testKey, "DEVNET_INSTANCE=" + instance}, ExposedPorts: nat.PortSet{port: {}}},
		&container.HostConfig{NetworkMode: container.NetworkMode(instance),
			Binds:        []string{"/var/run/docker.sock:/var/run/docker.sock", cfg + ":/devnet.yaml:ro", vol.Name + ":" + devnet.DefaultVPNDir},
			PortBindings: nat.PortMap{port: {{HostIP: "127.0.0.1"}}}},
		nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the devnet removes its containers and VPN networks (leaving itself out of them) before it exits.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		timeout := 60
		if err := docker.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &timeout}); err != nil {
			t.Errorf("stopping the devnet: %v", err)
		}
		if t.Failed() {
			if logs, err := docker.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true}); err == nil {
				var out bytes.Buffer
				_, _ = stdcopy.StdCopy(&out, &out, logs)
				t.Logf("devnet logs:\n%s", out.String())
			}
		}
		_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+instance))
		if cs, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) != 0 {
			t.Errorf("the devnet left %d containers (err %v)", len(cs), err)
			for _, c := range cs {
				_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
		left, err := docker.NetworkList(ctx, network.ListOptions{Filters: f})
		for _, n := range left {
			t.Errorf("the devnet left network %s", n.Name)
			_ = docker.NetworkRemove(ctx, n.ID)
		}
		if err != nil {
			t.Errorf("listing networks: %v", err)
		}
	})
	if err := docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	insp, err := docker.ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	binds := insp.NetworkSettings.Ports[port]
	if len(binds) == 0 {
		t.Fatalf("port %s is not published: %+v", port, insp.NetworkSettings.Ports)
	}
	url = "http://127.0.0.1:" + binds[0].HostPort
	c2 := yagna.New(url, testKey)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c2.Me(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the devnet does not answer on %s: %v", url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return url, instance, c.ID
}
