package devnet_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestVPNNodeRebuiltAtItsAddressIsReachableAtOnce: a node rebuilt at the address of one that is gone (a
// repair at a service's planned VPN address) is reachable at once by the nodes that talked to the old one,
// and an old connection to that address is reset by the new node rather than left hanging. On yagna the
// exe-unit forwards a VM's packet by its destination IP to the node that holds it now
// (exe-unit/src/network/vpn.rs handle_ip); the devnet's relay does the same (vpnrelay.go), and its TUN
// devices have no link layer whose cache could name the old node.
func TestVPNNodeRebuiltAtItsAddressIsReachableAtOnce(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{{Name: "p", Count: 3}}})
	buildProviderImage(t, e.docker)
	ctx := ctxT(t, 4*time.Minute)
	n, err := e.c.CreateNetwork(ctx, yagna.NewNetwork{IP: "10.213.36.0", Mask: "255.255.255.0"})
	if err != nil {
		t.Fatalf("CreateNetwork: %v", err)
	}
	const addrA, addrB = "10.213.36.3", "10.213.36.2"
	rent := func() negotiated {
		neg := e.rent(ctx, taskPackage(testHash))
		t.Cleanup(func() {
			_ = e.c.TerminateAgreement(context.Background(), neg.agreement, yagna.TerminationReason("test over"))
			_ = e.c.ReleaseAllocation(context.Background(), neg.alloc.AllocationID)
		})
		return neg
	}
	node := func(neg negotiated, ip string) string {
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
	sh := func(act, script string) string {
		out, ok := try(act, script)
		if !ok {
			t.Fatalf("running %q: %s", script, out)
		}
		return out
	}
	// An echo server on port 5000, for any number of connections.
	const echoServer = `nc -ll -p 5000 -e /bin/cat > /dev/null 2>&1 &`
	a := node(rent(), addrA)
	oldB := rent()
	b := node(oldB, addrB)
	// Rented now, so that what follows B's end takes no market round.
	newB := rent()
	sh(b, echoServer)
	// A holds a connection to B: nc sends what is written to /tmp/in, and writes its exit code to /tmp/rc
	// when the connection ends.
	sh(a, `mkfifo /tmp/in; (nc `+addrB+` 5000 < /tmp/in > /tmp/out 2> /tmp/err; echo $? > /tmp/rc) > /dev/null 2>&1 &
		sleep 600 > /tmp/in 2> /dev/null &`)
	sh(a, "echo before > /tmp/in")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(sh(a, "cat /tmp/out"), "before"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B did not echo A's line within 10 s: out %q, err %q", sh(a, "cat /tmp/out"), sh(a, "cat /tmp/err /tmp/rc 2>&1; true"))
		}
	}

	// B's provider vanishes as a VM does, without a word: its link goes down first, so that its kernel
	// sends no FIN when its processes die. The requestor takes its node out of the network and rebuilds B
	// at the same address on another provider.
	sh(b, `ip link set dev vpn0 down`)
	if status, _ := e.killProvider(oldB.providerID, map[string]any{"mode": "crash"}); status != http.StatusOK {
		t.Fatalf("killing B's provider: %d", status)
	}
	if err := e.c.RemoveNode(ctx, n.ID, oldB.providerID); err != nil {
		t.Fatal(err)
	}
	b2 := node(newB, addrB)
	sh(b2, echoServer)

	// A reaches the new B at once, with what it cached of the old one.
	if out, ok := try(a, `echo again | timeout 3 nc -w 2 `+addrB+` 5000`); !ok || !strings.Contains(out, "again") {
		t.Errorf("A did not reach the node rebuilt at %s within 3 s: %q", addrB, out)
	}
	// The requestor's tunnel to the address reaches the new B, never the crashed one.
	for i := range 4 {
		conn, err := e.c.DialTCPConn(ctx, n.ID, addrB, 5000)
		if err != nil {
			t.Fatalf("tunnel %d to %s:5000: %v", i, addrB, err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		line := fmt.Sprintf("tunnel %d\n", i)
		got := make([]byte, len(line))
		if _, err := conn.Write([]byte(line)); err != nil {
			t.Fatalf("tunnel %d: writing: %v", i, err)
		}
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != line {
			t.Fatalf("tunnel %d: read back %q, %v; want %q", i, got, err, line)
		}
		_ = conn.Close()
	}
	// The connection A held to the old B is reset by the new one, which knows nothing of it. (busybox nc
	// exits 0 on a reset as on an end; the kernel counts resets of established connections.)
	const estabResets = `awk '/^Tcp:/ { if (!c) { for (i = 1; i <= NF; i++) if ($i == "EstabResets") c = i } else print $c }' /proc/net/snmp`
	resetsBefore := strings.TrimSpace(sh(a, estabResets))
	sh(a, "timeout 2 sh -c 'echo after > /tmp/in'")
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if rc, ok := try(a, "cat /tmp/rc 2> /dev/null"); ok && rc != "" {
			if resets := strings.TrimSpace(sh(a, estabResets)); resets == resetsBefore {
				t.Errorf("A's old connection to %s ended (exit %s, %q) without a reset (EstabResets still %s)", addrB, strings.TrimSpace(rc), sh(a, "cat /tmp/err"), resets)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("A's old connection to %s was not reset within 3 s of a write to it", addrB)
			break
		}
	}
}
