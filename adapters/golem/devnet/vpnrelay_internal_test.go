package devnet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/gcompose/gcompose/internal/vpnwire"
)

// fakeNode speaks devnet-init's side of the relay's protocol (cmd/devnet-init/vpn.go) for a unit test of
// the routing: the e2e of the real thing is TestVPNsOfOneRangeStayApart and the rebuild test.
type fakeNode struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func connectNode(t *testing.T, r *relay, vpns []string, addrs ...string) (*fakeNode, *vpnLink) {
	t.Helper()
	var ips []netip.Addr
	for _, a := range addrs {
		ips = append(ips, netip.MustParseAddr(a))
	}
	token := newID()
	l := r.expect(token, vpns, ips)
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "vpn %s\n", token); err != nil {
		t.Fatal(err)
	}
	if err := vpnwire.Write(c, vpnwire.Frame{Type: vpnwire.FrameReady}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-l.ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the relay did not take the node's ready")
	}
	return &fakeNode{t: t, conn: c, r: bufio.NewReader(c)}, l
}

// packet is an IPv4 header from src to dst, then body.
func packet(src, dst, body string) []byte {
	p := make([]byte, 20, 20+len(body))
	p[0] = 0x45
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	return append(p, body...)
}

func (n *fakeNode) send(vpn byte, p []byte) {
	if err := vpnwire.Write(n.conn, vpnwire.Frame{Type: vpnwire.FramePacket, VPN: vpn, Payload: p}); err != nil {
		n.t.Fatal(err)
	}
}

// next is the next frame the node gets within d, or false.
func (n *fakeNode) next(d time.Duration) (vpnwire.Frame, bool) {
	_ = n.conn.SetReadDeadline(time.Now().Add(d))
	f, err := vpnwire.Read(n.r)
	return f, err == nil
}

func newTestRelay(t *testing.T) *relay {
	r := newRelay(slog.New(slog.NewTextHandler(io.Discard, nil)), t.TempDir(), nil, false)
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(r.close)
	return r
}

func TestRelayRoutesWithinAVPNByDestination(t *testing.T) {
	r := newTestRelay(t)
	// Two VPNs on one range; c is on both (its TUN 0 on A, 1 on B).
	a2, _ := connectNode(t, r, []string{"A"}, "10.0.0.2")
	a3, _ := connectNode(t, r, []string{"A"}, "10.0.0.3")
	b2, _ := connectNode(t, r, []string{"B"}, "10.0.0.2")
	c, _ := connectNode(t, r, []string{"A", "B"}, "10.0.0.9", "10.0.0.9")

	a3.send(0, packet("10.0.0.3", "10.0.0.2", "to a2"))
	if f, ok := a2.next(2 * time.Second); !ok || string(f.Payload[20:]) != "to a2" || f.VPN != 0 {
		t.Fatalf("a2 did not get a3's packet: %+v %v", f, ok)
	}
	if f, ok := b2.next(200 * time.Millisecond); ok {
		t.Fatalf("b2, at the same address on VPN B, got VPN A's packet: %q", f.Payload)
	}
	b2.send(0, packet("10.0.0.2", "10.0.0.9", "from B"))
	if f, ok := c.next(2 * time.Second); !ok || f.VPN != 1 || string(f.Payload[20:]) != "from B" {
		t.Fatalf("c did not get B's packet on its TUN for B (1): %+v %v", f, ok)
	}
	// VPN B holds no 10.0.0.3; A's node there stays out of reach, and so does an address nobody holds.
	b2.send(0, packet("10.0.0.2", "10.0.0.3", "across"))
	b2.send(0, packet("10.0.0.2", "10.0.0.200", "nowhere"))
	if f, ok := a3.next(200 * time.Millisecond); ok {
		t.Fatalf("a3 got a packet from VPN B: %q", f.Payload)
	}
}

func TestRelayHandsAnAddressToTheNodeRebuiltAtIt(t *testing.T) {
	r := newTestRelay(t)
	a, _ := connectNode(t, r, []string{"A"}, "10.0.0.3")
	old, oldLink := connectNode(t, r, []string{"A"}, "10.0.0.2")
	rebuilt, _ := connectNode(t, r, []string{"A"}, "10.0.0.2")
	a.send(0, packet("10.0.0.3", "10.0.0.2", "hello"))
	if f, ok := rebuilt.next(2 * time.Second); !ok || string(f.Payload[20:]) != "hello" {
		t.Fatalf("the node rebuilt at 10.0.0.2 did not get the packet: %v", ok)
	}
	if _, ok := old.next(200 * time.Millisecond); ok {
		t.Fatal("the old node still got the packet")
	}
	// The old node's link ending does not take the address from the new one.
	r.drop(oldLink)
	a.send(0, packet("10.0.0.3", "10.0.0.2", "again"))
	if f, ok := rebuilt.next(2 * time.Second); !ok || string(f.Payload[20:]) != "again" {
		t.Fatalf("after the old link ended, the rebuilt node did not get the packet: %v", ok)
	}
	// A removed VPN routes nothing.
	r.dropVPN("A")
	a.send(0, packet("10.0.0.3", "10.0.0.2", "gone"))
	if _, ok := rebuilt.next(200 * time.Millisecond); ok {
		t.Fatal("a packet was routed on a removed VPN")
	}
}

func TestRelayDialAnswersWithTheNodesStream(t *testing.T) {
	r := newTestRelay(t)
	n, l := connectNode(t, r, []string{"A"}, "10.0.0.2")
	go func() { // devnet-init's side of a dial: a stream that echoes one line, or a refusal
		for {
			f, ok := n.next(5 * time.Second)
			if !ok {
				return
			}
			var id string
			var port int
			if _, err := fmt.Sscanf(string(f.Payload), "%s %d", &id, &port); err != nil || f.Type != vpnwire.FrameDial {
				continue
			}
			c, err := net.Dial("unix", r.sock)
			if err != nil {
				return
			}
			if port != 80 {
				fmt.Fprintf(c, "tcp %s %s err dial tcp 10.0.0.2:%d: connect: connection refused\n", l.token, id, port)
				c.Close()
				continue
			}
			fmt.Fprintf(c, "tcp %s %s ok\nwelcome\n", l.token, id)
			go func() { _, _ = io.Copy(c, c) }()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := r.dial(ctx, l, "A", 80)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(s)
	if line, err := br.ReadString('\n'); err != nil || line != "welcome\n" {
		t.Fatalf("the stream's first line (sent with its header) = %q, %v", line, err)
	}
	fmt.Fprintf(s, "echo\n")
	if line, err := br.ReadString('\n'); err != nil || line != "echo\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	s.Close()
	if _, err := r.dial(ctx, l, "A", 81); err == nil || err.Error() != "dial tcp 10.0.0.2:81: connect: connection refused" {
		t.Errorf("a refused dial: %v", err)
	}
	if _, err := r.dial(ctx, l, "B", 80); err == nil {
		t.Error("a dial on a VPN the node is not on succeeded")
	}
}

func TestMountOf(t *testing.T) {
	mps := []mountPoint{
		{Type: mount.TypeBind, Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock"},
		{Type: mount.TypeVolume, Source: "proj_vpn", Destination: "/run/gcompose-devnet"},
		{Type: mount.TypeBind, Source: "/srv/x", Destination: "/data"},
		{Type: mount.TypeTmpfs, Destination: "/tmp"},
	}
	for _, c := range []struct {
		dir, src, rel string
		ok            bool
	}{
		{"/run/gcompose-devnet", "proj_vpn", ".", true},
		{"/data/sub/dir", "/srv/x", "sub/dir", true},
		{"/tmp", "", "", false},
		{"/run", "", "", false},
		{"/run/gcompose-devnet-other", "", "", false},
	} {
		mp, rel, ok := mountOf(mps, c.dir)
		if ok != c.ok || (ok && (mp.Source != c.src || rel != c.rel)) {
			t.Errorf("mountOf(%s) = %+v %q %v, want %s %q %v", c.dir, mp, rel, ok, c.src, c.rel, c.ok)
		}
	}
}
