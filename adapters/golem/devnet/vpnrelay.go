package devnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/gcompose/gcompose/internal/vpnwire"
)

// A VPN is carried in user space, as on Golem, where ya-runtime-vm connects the VM's NIC to a socket and
// yagna carries its frames between the nodes, forwarding an IP packet by its destination address to the
// node that holds that address now (exe-unit/src/network/vpn.rs handle_ip). No Docker network is made
// for a VPN: a node's container has network mode none, /dev/net/tun and CAP_NET_ADMIN, and devnet-init
// (`devnet-init vpn`, cmd/devnet-init/vpn.go) gives it a TUN device per VPN with its address and relays
// the packets over the devnet's unix socket, in a directory every payload container mounts. The relay
// routes each packet within its VPN by destination: nodes on different VPNs never meet, ranges of
// different VPNs may overlap, a node rebuilt at an address is reached at once (there is no link layer to
// cache), and nothing leaves a VPN (no default route; a packet to an address no node holds is dropped).
// The TCP tunnel asks devnet-init in the node to dial the port on its own VPN address and streams the
// bytes over a connection of their own (connectTCP).

// vpnInner is where payload containers mount the relay's directory.
const vpnInner = "/.devnet-vpn"

// relay is the devnet's end of the nodes' VPN links.
type relay struct {
	log *slog.Logger
	// sock is the socket's path here; inner its path in the payload containers, which mount mnt.
	sock, inner string
	mnt         mount.Mount
	// err says why nodes cannot join VPNs (no directory the payload containers can mount); the
	// deploy of a node on a VPN fails with it.
	err    error
	ownDir string // a directory the relay made, removed at close
	// root is the directory here that the payload containers mount: the relay's own directory, or
	// the mount of the devnet's container that holds it (initshare.go).
	root    string
	ln      *net.UnixListener
	mu      sync.Mutex
	links   map[string]*vpnLink             // token → the link of a node, from its start on
	routes  map[string]map[netip.Addr]route // VPN id → address → the node holding it now
	pending map[string]*dialWait            // tunnel stream id → the connectTCP waiting for it
	closed  bool
}

type route struct {
	link *vpnLink
	idx  byte // the VPN's index in the node's list (its TUN device)
}

type dialWait struct {
	token string
	ch    chan dialResult
}

type dialResult struct {
	conn net.Conn
	err  error
}

// vpnLink is a node's connection to the relay, made by its devnet-init.
type vpnLink struct {
	token string
	vpns  []string     // VPN id per TUN device
	addrs []netip.Addr // the node's address per TUN device
	ready chan error   // FrameReady (nil) or why not, once
	out   chan []byte  // encoded frames to the node; full: a packet is dropped, as a congested link drops it
	done  chan struct{}
	once  sync.Once
	conn  net.Conn
}

func (l *vpnLink) close() {
	l.once.Do(func() {
		close(l.done)
		if l.conn != nil {
			_ = l.conn.Close()
		}
	})
}

// linkQueue bounds the frames queued to one node.
const linkQueue = 512

// newRelay listens in dir (made when missing; a temporary directory when dir is empty and the devnet
// runs on the host) and works out what the payload containers mount to reach it: dir itself when the
// devnet runs on the Docker host, or the volume or bind mount of the devnet's own container (self) that
// holds dir. A relay that cannot serve is returned with err set: the devnet serves all but VPNs.
func newRelay(log *slog.Logger, dir string, selfMounts []mountPoint, inContainer bool) *relay {
	r := &relay{log: log, links: map[string]*vpnLink{}, routes: map[string]map[netip.Addr]route{}, pending: map[string]*dialWait{}}
	if dir == "" && !inContainer {
		d, err := os.MkdirTemp("", "gcompose-devnet-vpn-")
		if err != nil {
			r.err = fmt.Errorf("VPNs: making the relay's socket directory: %w", err)
			return r
		}
		dir, r.ownDir = d, d
	}
	if dir == "" {
		dir = DefaultVPNDir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.err = fmt.Errorf("VPNs: making the relay's socket directory %s: %w", dir, err)
		return r
	}
	name := "vpn-" + newID()[:12] + ".sock"
	r.sock = filepath.Join(dir, name)
	if inContainer {
		mp, rel, ok := mountOf(selfMounts, dir)
		if !ok {
			r.err = fmt.Errorf("VPNs: the devnet runs in a container but its VPN directory %s is no volume or bind mount of it: the payload containers could not reach its socket (mount a named volume there, as docker-compose.yml does, or name another directory with -vpn-dir)", dir)
			return r
		}
		r.mnt = mount.Mount{Type: mp.Type, Source: mp.Source, Target: vpnInner, ReadOnly: true}
		r.root = mp.Destination
		if mp.Type == mount.TypeVolume {
			r.mnt.VolumeOptions = &mount.VolumeOptions{NoCopy: true}
		}
		r.inner = path.Join(vpnInner, rel, name)
	} else {
		r.mnt = mount.Mount{Type: mount.TypeBind, Source: dir, Target: vpnInner, ReadOnly: true}
		r.inner = path.Join(vpnInner, name)
		r.root = dir
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: r.sock, Net: "unix"})
	if err != nil {
		r.err = fmt.Errorf("VPNs: listening on %s: %w", r.sock, err)
		return r
	}
	// Any user in a payload container may connect (devnet-init runs as root, but a user-namespaced
	// root may not own the file); a link is taken only with the token its start was given.
	_ = os.Chmod(r.sock, 0o666)
	r.ln = ln
	go r.accept()
	return r
}

// DefaultVPNDir is where a devnet that runs in a container keeps its VPN socket: a named volume there is
// shared with the payload containers (docker-compose.yml).
const DefaultVPNDir = "/run/gcompose-devnet"

// mountPoint is the part of a container's mount the relay needs.
type mountPoint struct {
	Type        mount.Type
	Source      string // the volume's name, or the host path of a bind mount
	Destination string
}

// mountOf finds the mount that holds dir, and dir's path inside it.
func mountOf(mps []mountPoint, dir string) (mountPoint, string, bool) {
	var best mountPoint
	rel, found := "", false
	for _, mp := range mps {
		if mp.Type != mount.TypeVolume && mp.Type != mount.TypeBind {
			continue
		}
		r, err := filepath.Rel(mp.Destination, dir)
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			continue
		}
		if !found || len(mp.Destination) > len(best.Destination) {
			best, rel, found = mp, r, true
		}
	}
	return best, rel, found
}

// close stops the relay and ends every link; a node's packets go nowhere after it.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	links := r.links
	r.links = map[string]*vpnLink{}
	r.routes = map[string]map[netip.Addr]route{}
	r.mu.Unlock()
	if r.ln != nil {
		_ = r.ln.Close()
	}
	for _, l := range links {
		l.close()
	}
	if r.ownDir != "" {
		_ = os.RemoveAll(r.ownDir)
	} else if r.sock != "" {
		_ = os.Remove(r.sock)
	}
}

// expect makes the link a node's devnet-init will open with token, on the VPNs vpns at addrs.
func (r *relay) expect(token string, vpns []string, addrs []netip.Addr) *vpnLink {
	l := &vpnLink{token: token, vpns: vpns, addrs: addrs, ready: make(chan error, 1), out: make(chan []byte, linkQueue), done: make(chan struct{})}
	r.mu.Lock()
	r.links[token] = l
	r.mu.Unlock()
	return l
}

// drop ends l and takes its addresses out of the routes.
func (r *relay) drop(l *vpnLink) {
	if l == nil {
		return
	}
	r.mu.Lock()
	if r.links[l.token] == l {
		delete(r.links, l.token)
	}
	for _, addrs := range r.routes {
		for a, rt := range addrs {
			if rt.link == l {
				delete(addrs, a)
			}
		}
	}
	r.mu.Unlock()
	l.close()
}

// unroute takes addr of VPN vpnID out of the routes when l holds it (a node removed from the VPN).
func (r *relay) unroute(vpnID string, addr netip.Addr, l *vpnLink) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.routes[vpnID][addr]; ok && rt.link == l {
		delete(r.routes[vpnID], addr)
	}
}

// dropVPN forgets a removed VPN's routes: its nodes' packets are dropped from then on.
func (r *relay) dropVPN(vpnID string) {
	r.mu.Lock()
	delete(r.routes, vpnID)
	r.mu.Unlock()
}

// accept takes the connections of the nodes' devnet-init.
func (r *relay) accept() {
	for {
		c, err := r.ln.AcceptUnix()
		if err != nil {
			return
		}
		go r.serve(c)
	}
}

// bufConn reads through the reader that read the header line.
type bufConn struct {
	*net.UnixConn
	r *bufio.Reader
}

func (c bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (r *relay) serve(c *net.UnixConn) {
	br := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := br.ReadString('\n')
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	f := strings.Fields(strings.TrimSuffix(line, "\n"))
	switch {
	case len(f) == 2 && f[0] == "vpn":
		r.mu.Lock()
		l := r.links[f[1]]
		taken := l != nil && l.conn != nil
		if l != nil && !taken {
			l.conn = c
		}
		r.mu.Unlock()
		if l == nil || taken {
			_ = c.Close()
			return
		}
		r.runLink(l, br)
	case len(f) >= 4 && f[0] == "tcp":
		r.mu.Lock()
		w := r.pending[f[2]]
		if w != nil && w.token == f[1] {
			delete(r.pending, f[2])
		} else {
			w = nil
		}
		r.mu.Unlock()
		if w == nil {
			_ = c.Close()
			return
		}
		if f[3] != "ok" {
			_ = c.Close()
			w.ch <- dialResult{err: errors.New(strings.TrimPrefix(strings.Join(f[3:], " "), "err "))}
			return
		}
		w.ch <- dialResult{conn: bufConn{c, br}}
	default:
		_ = c.Close()
	}
}

// runLink relays a node's frames until its connection ends, then takes it out of the routes.
func (r *relay) runLink(l *vpnLink, br *bufio.Reader) {
	defer r.drop(l)
	go func() {
		for {
			select {
			case b := <-l.out:
				if _, err := l.conn.Write(b); err != nil {
					l.close()
					return
				}
			case <-l.done:
				return
			}
		}
	}()
	readyOnce := func(err error) {
		select {
		case l.ready <- err:
		default:
		}
	}
	defer readyOnce(errors.New("devnet-init closed its VPN link"))
	for {
		f, err := vpnwire.Read(br)
		if err != nil {
			return
		}
		switch f.Type {
		case vpnwire.FrameReady:
			r.mu.Lock()
			if !r.closed {
				for i, vpnID := range l.vpns {
					if r.routes[vpnID] == nil {
						r.routes[vpnID] = map[netip.Addr]route{}
					}
					// The node that holds the address now: a node rebuilt at it takes its traffic at once.
					r.routes[vpnID][l.addrs[i]] = route{link: l, idx: byte(i)}
				}
			}
			r.mu.Unlock()
			readyOnce(nil)
		case vpnwire.FrameError:
			readyOnce(errors.New(string(f.Payload)))
			return
		case vpnwire.FramePacket:
			r.forward(l, f)
		}
	}
}

// forward sends a node's IP packet to the node of the same VPN that holds its destination address; one
// for an address no node holds (the requestor's, a broadcast) is dropped.
func (r *relay) forward(from *vpnLink, f vpnwire.Frame) {
	p := f.Payload
	if int(f.VPN) >= len(from.vpns) || len(p) < 20 || p[0]>>4 != 4 {
		return
	}
	dst := netip.AddrFrom4([4]byte{p[16], p[17], p[18], p[19]})
	r.mu.Lock()
	rt, ok := r.routes[from.vpns[f.VPN]][dst]
	r.mu.Unlock()
	if !ok {
		return
	}
	select {
	case rt.link.out <- vpnwire.Encode(vpnwire.Frame{Type: vpnwire.FramePacket, VPN: rt.idx, Payload: p}):
	default:
	}
}

// dial asks the node on l to connect to port on its own address on VPN vpnID and returns the stream.
func (r *relay) dial(ctx context.Context, l *vpnLink, vpnID string, port int) (net.Conn, error) {
	idx := -1
	for i, v := range l.vpns {
		if v == vpnID {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("the node is not on network %s", vpnID)
	}
	id := newID()[:16]
	w := &dialWait{token: l.token, ch: make(chan dialResult, 1)}
	r.mu.Lock()
	r.pending[id] = w
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
		select { // a stream that came too late
		case res := <-w.ch:
			if res.conn != nil && ctx.Err() != nil {
				_ = res.conn.Close()
			}
		default:
		}
	}()
	req := vpnwire.Encode(vpnwire.Frame{Type: vpnwire.FrameDial, VPN: byte(idx), Payload: fmt.Appendf(nil, "%s %d", id, port)})
	select {
	case l.out <- req:
	case <-l.done:
		return nil, errors.New("the node's VPN link is closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case res := <-w.ch:
		return res.conn, res.err
	case <-l.done:
		return nil, errors.New("the node's VPN link is closed")
	case <-ctx.Done():
		return nil, fmt.Errorf("the node did not answer: %w", ctx.Err())
	}
}
