package devnet_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
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
// minute with "context deadline exceeded". Nodes talk over macvlan instead, which the host never sees.
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

// TestVPNNodesAnswerARPOnlyOnTheLink: a node's VPN address is local to it on every interface, its
// anchor one too (see vpn in vpndocker.go), and Linux answers ARP for any local address on any interface. Had
// the db node answered on the anchor as well, web would reach it through the Linux bridge, where the
// host's netfilter sees (and may masquerade) VPN traffic; every answer must come from the db's macvlan
// interface, the one that holds the VPN address.
func TestVPNNodesAnswerARPOnlyOnTheLink(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 2}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 3*time.Minute)
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.34.0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	node := func(ip string) string {
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
	// sh runs a script in a node and returns its output.
	sh := func(act, script string) string {
		res := e.exec(ctx, act, run("/bin/sh", "-c", script))
		if len(res) != 1 || res[0].Result != yagna.ResultOk {
			t.Fatalf("running %q: %+v", script, res)
		}
		return res[0].Stdout
	}
	// The interface that holds a VPN address: the node's macvlan interface.
	const devOf = `$(ip -o -4 addr show | awk -v a="$1" '{split($4, p, "/"); if (p[1] == a) { sub(/@.*/, "", $2); print $2 } }')`
	web, db := node("10.213.34.3"), node("10.213.34.2")
	linkMAC := strings.TrimSpace(sh(db, `set -- 10.213.34.2; cat /sys/class/net/`+devOf+`/address`))
	out := sh(web, `set -- 10.213.34.3; arping -c 3 -w 5 -I `+devOf+` 10.213.34.2`)
	answers := regexp.MustCompile(`reply from 10\.213\.34\.2 \[([0-9a-f:]+)\]`).FindAllStringSubmatch(out, -1)
	if len(answers) == 0 {
		t.Fatalf("the db node did not answer web's ARP requests:\n%s", out)
	}
	for _, a := range answers {
		if a[1] != linkMAC {
			t.Errorf("the db node answered from %s, not from its macvlan interface (%s):\n%s", a[1], linkMAC, out)
			break
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
	port := nat.Port("7465/tcp")
	c, err := docker.ContainerCreate(ctx,
		&container.Config{Image: image, Cmd: []string{"-listen", ":7465", "-config", "/devnet.yaml"}, Labels: labels,
			Env: []string{"YAGNA_APPKEY=" + testKey, "DEVNET_INSTANCE=" + instance}, ExposedPorts: nat.PortSet{port: {}}},
		&container.HostConfig{NetworkMode: container.NetworkMode(instance),
			Binds:        []string{"/var/run/docker.sock:/var/run/docker.sock", cfg + ":/devnet.yaml:ro"},
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
