package devnet

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

const netPrefix = "/net-api/v1"

// vpn is a Net API network, backed by an internal Docker bridge network of its own. The bridge does not
// carry the VPN's range: real yagna lets any number of requestors (and apps) use one range, say
// 192.168.77.0/24, at once, and Docker refuses two networks with overlapping ranges ("Pool overlaps").
// So the bridge gets a free /24 of bridgeRange, each node's container is given its VPN address on the
// bridge's interface when it starts (the VPN's range is then a connected route inside it, and nodes
// reach each other on the shared link), and TCP tunnels dial a node's bridge address. When the devnet
// runs in a container, it joins each bridge so that it can dial them.
type vpn struct {
	id, ip, mask string
	gateway      string
	prefix       netip.Prefix
	bridge       netip.Prefix // the Docker network's own range, from bridgeRange
	dockerName   string
	dockerID     string
	addresses    []string
	nodes        map[string][]string // node id → its addresses (yagna lets a node hold several)
	created      time.Time
	conns        map[*tcpConn]struct{}
}

type tcpConn struct {
	localIP    string
	localPort  int
	remoteIP   string
	remotePort int
}

func (s *Server) routeNet(api func(string, http.HandlerFunc)) {
	api("GET "+netPrefix+"/net", s.listNetworks)
	api("POST "+netPrefix+"/net", s.createNetwork)
	api("GET "+netPrefix+"/net/{id}", s.getNetwork)
	api("DELETE "+netPrefix+"/net/{id}", s.removeNetwork)
	api("GET "+netPrefix+"/net/{id}/addresses", s.getAddresses)
	api("POST "+netPrefix+"/net/{id}/addresses", s.addAddress)
	api("GET "+netPrefix+"/net/{id}/nodes", s.getNodes)
	api("POST "+netPrefix+"/net/{id}/nodes", s.addNode)
	api("DELETE "+netPrefix+"/net/{id}/nodes/{node}", s.removeNode)
	api("GET "+netPrefix+"/net/{id}/tcp", s.getConnections)
	api("GET "+netPrefix+"/net/{id}/tcp/{ip}/{port}", s.connectTCP)
}

func (v *vpn) json() map[string]any {
	return map[string]any{"id": v.id, "ip": v.ip, "mask": v.mask, "gateway": v.gateway}
}

// parseNetwork reads ip (address, or address/prefix) and mask (dotted) into a prefix.
func parseNetwork(ip, mask string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(ip); err == nil {
		if !p.Addr().Is4() {
			return netip.Prefix{}, fmt.Errorf("only IPv4 networks are supported")
		}
		return p.Masked(), nil
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || !addr.Is4() {
		return netip.Prefix{}, fmt.Errorf("ip %q is not an IPv4 address", ip)
	}
	bits := 24
	if mask != "" {
		m := net.ParseIP(mask).To4()
		if m == nil {
			return netip.Prefix{}, fmt.Errorf("mask %q is not a dotted IPv4 mask", mask)
		}
		ones, total := net.IPMask(m).Size()
		if total == 0 {
			return netip.Prefix{}, fmt.Errorf("mask %q is not contiguous", mask)
		}
		bits = ones
	}
	if bits > 30 {
		return netip.Prefix{}, fmt.Errorf("a /%d network has no room for nodes", bits)
	}
	return netip.PrefixFrom(addr, bits).Masked(), nil
}

func lastHost(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << (32 - p.Bits())) - 1 // broadcast
	v--
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func dottedMask(bits int) string {
	m := net.CIDRMask(bits, 32)
	return net.IP(m).String()
}

// bridgeRange holds the devnet's Docker bridges, one /24 each; a /16 that home and office networks
// rarely use (10.199.x.y).
var bridgeRange = netip.MustParsePrefix("10.199.0.0/16")

// createBridge creates the internal Docker network behind a VPN on a free /24 of bridgeRange that does
// not overlap the VPN's own range; Docker refuses a range in use, so it tries others.
func (s *Server) createBridge(ctx context.Context, name string, vpnRange netip.Prefix, labels map[string]string) (string, netip.Prefix, error) {
	base := bridgeRange.Addr().As4()
	start := rand.IntN(256)
	var lastErr error
	for i := 0; i < 256; i++ {
		third := byte((start + i) % 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], third, 0}), 24)
		if p.Overlaps(vpnRange) {
			continue
		}
		// Not Internal: Docker drops what an internal bridge forwards unless source and destination are in
		// the bridge's own range, which VPN addresses are not. Without masquerading, and without the
		// default route that joinVPNs deletes in each node, nothing leaves it for the outside world.
		resp, err := s.docker.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:  "bridge",
			IPAM:    &network.IPAM{Config: []network.IPAMConfig{{Subnet: p.String()}}},
			Options: map[string]string{"com.docker.network.bridge.enable_ip_masquerade": "false"},
			Labels:  labels,
		})
		if err == nil {
			return resp.ID, p, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "overlaps") {
			break
		}
	}
	return "", netip.Prefix{}, fmt.Errorf("no free /24 in %s: %w", bridgeRange, lastErr)
}

func (s *Server) createNetwork(w http.ResponseWriter, r *http.Request) {
	var body struct {
		IP      string `json:"ip"`
		Mask    string `json:"mask"`
		Gateway string `json:"gateway"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	prefix, err := parseNetwork(body.IP, body.Mask)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	id := newID()
	v := &vpn{id: id, ip: prefix.Addr().String(), mask: dottedMask(prefix.Bits()), gateway: body.Gateway, prefix: prefix,
		dockerName: s.vpnPrefix + "-" + id[:12], nodes: map[string][]string{}, conns: map[*tcpConn]struct{}{}}
	resp, bridge, err := s.createBridge(r.Context(), v.dockerName, prefix, s.labels(map[string]string{labelInstance + ".net": id}))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "creating Docker network for %s: %v", prefix, err)
		return
	}
	v.dockerID, v.bridge = resp, bridge
	if s.self != "" {
		// Below the container's own network in the choice of its default gateway (vpnNetPrefix): by
		// priority on engines that have one (API 1.48), by name on all.
		if err := s.docker.NetworkConnect(r.Context(), resp, s.self, &network.EndpointSettings{GwPriority: -1}); err != nil {
			_ = s.docker.NetworkDisconnect(context.Background(), resp, s.self, true)
			_ = s.docker.NetworkRemove(context.Background(), resp)
			writeError(w, http.StatusInternalServerError, "joining the devnet container to network %s: %v", prefix, err)
			return
		}
	}
	s.mu.Lock()
	v.created = s.now()
	s.networks[id] = v
	s.mu.Unlock()
	s.log.Info("network created", "net", id, "range", prefix.String(), "docker", v.dockerName, "bridge", bridge.String())
	writeJSON(w, http.StatusOK, v.json())
}

func (s *Server) listNetworks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*vpn, 0, len(s.networks))
	for _, v := range s.networks {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].created.Before(list[j].created) })
	out := []map[string]any{}
	for _, v := range list {
		out = append(out, v.json())
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) networkOr404(w http.ResponseWriter, id string) (*vpn, bool) {
	return find(w, s.networks, "network", id)
}

func (s *Server) getNetwork(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.networkOr404(w, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, v.json())
	}
}

func (s *Server) removeNetwork(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if ok {
		delete(s.networks, v.id)
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx := r.Context()
	if info, err := s.docker.NetworkInspect(ctx, v.dockerID, network.InspectOptions{}); err == nil {
		for cid := range info.Containers {
			_ = s.docker.NetworkDisconnect(ctx, v.dockerID, cid, true)
		}
	}
	if err := s.docker.NetworkRemove(ctx, v.dockerID); err != nil && !errdefs.IsNotFound(err) {
		writeError(w, http.StatusInternalServerError, "removing Docker network %s: %v", v.dockerName, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getAddresses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	out := []map[string]string{}
	for _, a := range v.addresses {
		out = append(out, map[string]string{"ip": a})
	}
	writeJSON(w, http.StatusOK, out)
}

// inUse reports who holds ip in v; the caller holds s.mu.
func (v *vpn) inUse(ip string) (string, bool) {
	for _, a := range v.addresses {
		if a == ip {
			return "the requestor", true
		}
	}
	for id, ips := range v.nodes {
		for _, a := range ips {
			if a == ip {
				return "node " + id, true
			}
		}
	}
	return "", false
}

// checkIP parses ip as a host address of v (not the network, broadcast or Docker gateway address).
func (v *vpn) checkIP(ip string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil || !v.prefix.Contains(addr) {
		return netip.Addr{}, fmt.Errorf("%q is not an address of network %s", ip, v.prefix)
	}
	gw := lastHost(v.prefix)
	if addr == v.prefix.Addr() || addr == gw.Next() || addr == gw {
		return netip.Addr{}, fmt.Errorf("%s is reserved in network %s (network, broadcast or devnet gateway address)", ip, v.prefix)
	}
	return addr, nil
}

func (s *Server) addAddress(w http.ResponseWriter, r *http.Request) {
	var body struct {
		IP string `json:"ip"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	addr, err := v.checkIP(body.IP)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if who, used := v.inUse(addr.String()); used {
		writeError(w, http.StatusConflict, "%s is already assigned to %s", addr, who)
		return
	}
	v.addresses = append(v.addresses, addr.String())
	w.WriteHeader(http.StatusOK)
}

func (s *Server) getNodes(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	out := []map[string]string{}
	for id, ips := range v.nodes {
		for _, ip := range ips {
			out = append(out, map[string]string{"id": id, "ip": ip})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i]["ip"] < out[j]["ip"] })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) addNode(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
		IP string `json:"ip"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.ID == "" {
		writeError(w, http.StatusBadRequest, "id (the node id) is required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	addr, err := v.checkIP(body.IP)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	// As yagna: an address already taken (by a node or the requestor) is not an error, and the node
	// that holds it keeps it (core/vpn/src/network.rs Handler<AddNode> ignores Err(IpAddrTaken),
	// utils/networking/src/vpn/network.rs add_node); a node may hold several addresses.
	if who, used := v.inUse(addr.String()); used {
		s.log.Info("node added at a taken address: ignored, as yagna does", "network", v.id, "node", body.ID, "ip", addr, "holder", who)
		w.WriteHeader(http.StatusOK)
		return
	}
	v.nodes[body.ID] = append(v.nodes[body.ID], addr.String())
	w.WriteHeader(http.StatusOK)
}

func (s *Server) removeNode(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		s.mu.Unlock()
		return
	}
	node := r.PathValue("node")
	ips, ok := v.nodes[node]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "node %s not in network %s", node, v.id)
		return
	}
	// All its addresses go (utils/networking/src/vpn/network.rs remove_node).
	delete(v.nodes, node)
	var detach []string
	for _, act := range s.activities {
		if act.providerID == node && slices.Contains(ips, act.nets[v.id]) && act.containerID != "" && act.state != "Terminated" {
			detach = append(detach, act.containerID)
			delete(act.nets, v.id)
			delete(act.bridgeIPs, v.id)
		}
	}
	s.mu.Unlock()
	for _, cid := range detach {
		_ = s.docker.NetworkDisconnect(r.Context(), v.dockerID, cid, true)
	}
	w.WriteHeader(http.StatusOK)
}

// bridgeAddress is the Docker bridge address of the running node that holds VPN address ip, or "";
// the caller holds s.mu.
func (s *Server) bridgeAddress(v *vpn, ip string) string {
	for _, act := range s.activities {
		if act.state != "Terminated" && act.nets[v.id] == ip && act.bridgeIPs[v.id] != "" {
			return act.bridgeIPs[v.id]
		}
	}
	return ""
}

func (s *Server) getConnections(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	out := []map[string]any{}
	for c := range v.conns {
		out = append(out, map[string]any{"protocol": 6, "localIp": c.localIP, "localPort": c.localPort, "remoteIp": c.remoteIP, "remotePort": c.remotePort})
	}
	writeJSON(w, http.StatusOK, out)
}

// connectTCP is the websocket TCP tunnel: binary messages carry the bytes of a TCP connection to ip:port
// on the VPN, which the devnet dials directly (on the Docker host, or from its container joined to the VPN).
func (s *Server) connectTCP(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "port must be in 1..65535")
		return
	}
	s.mu.Lock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	var addr netip.Addr
	var bridgeIP string
	if ok {
		addr, err = netip.ParseAddr(r.PathValue("ip"))
		if err != nil || !v.prefix.Contains(addr) {
			writeError(w, http.StatusNotFound, "%s is not an address of network %s", r.PathValue("ip"), v.id)
			ok = false
		} else if bridgeIP = s.bridgeAddress(v, addr.String()); bridgeIP == "" {
			writeError(w, http.StatusNotFound, "connecting to %s in network %s: no running node has that address", addr, v.id)
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	target := net.JoinHostPort(bridgeIP, strconv.Itoa(port))
	dctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	var d net.Dialer
	tcp, err := d.DialContext(dctx, "tcp", target)
	cancel()
	if err != nil {
		writeError(w, http.StatusNotFound, "connecting to %s:%d in network %s: %v", addr, port, v.id, err)
		return
	}
	defer tcp.Close()
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		s.log.Warn("websocket upgrade failed", "err", err)
		return
	}
	ws.SetReadLimit(-1)
	conn := &tcpConn{remoteIP: addr.String(), remotePort: port}
	if la, ok := tcp.LocalAddr().(*net.TCPAddr); ok {
		conn.localIP, conn.localPort = la.IP.String(), la.Port
	}
	s.mu.Lock()
	v.conns[conn] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(v.conns, conn)
		s.mu.Unlock()
	}()
	ctx, stop := context.WithCancel(s.bgCtx)
	defer stop()
	go func() {
		select {
		case <-r.Context().Done():
		case <-ctx.Done():
		}
		stop()
	}()
	wsConn := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(tcp, wsConn)
		if c, ok := tcp.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(wsConn, tcp)
		done <- struct{}{}
	}()
	<-done
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	_ = wsConn.Close()
}
