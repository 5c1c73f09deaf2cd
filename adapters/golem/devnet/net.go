package devnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// netPrefix is the root of the Net API, which this file serves; the packets of a VPN are vpnrelay.go's.
const netPrefix = "/net-api/v1"

// vpn is a Net API network: bookkeeping (range, addresses, nodes). No Docker network backs it; its nodes'
// packets go through the devnet's relay (vpnrelay.go), so any number of VPNs, of any devnet on the host,
// may use the same range, as on yagna.
type vpn struct {
	id, ip, mask string
	gateway      string
	prefix       netip.Prefix
	addresses    []string
	nodes        map[string][]string // node id → its addresses (yagna lets a node hold several)
	created      time.Time
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
	api("GET "+netPrefix+"/net/{id}/tcp/{ip}/{port}", s.connectTCP)
}

// json is a Network as yagna answers it: "ip" in CIDR form ("192.168.0.0/24": core/vpn/src/network.rs
// VpnSupervisor::create_network, net_ip an smoltcp IpCidr, whose Display is addr/len), the dotted mask
// and the gateway (the first host when the request named none).
func (v *vpn) json() map[string]any {
	return map[string]any{"id": v.id, "ip": v.prefix.String(), "mask": v.mask, "gateway": v.gateway}
}

// writeNull answers 200 with the JSON literal null, as yagna's Net API answers every call that returns
// nothing (core/vpn/src/requestor.rs: Ok(web::Json(()))).
func writeNull(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, "null")
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
	// As yagna: the gateway is the first host unless the request names one, which must be an address
	// (IpAddr::from_str); the requestor holds the first host from the start (create_stack_network adds
	// node_ip, the first host, to its stack), so GET /addresses lists it before any POST /addresses.
	first := prefix.Addr().Next()
	gateway := first.String()
	if body.Gateway != "" {
		gw, err := netip.ParseAddr(body.Gateway)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid IP address: invalid IP address syntax")
			return
		}
		gateway = gw.String()
	}
	id := newID()
	v := &vpn{id: id, ip: prefix.Addr().String(), mask: dottedMask(prefix.Bits()), gateway: gateway, prefix: prefix,
		nodes: map[string][]string{}, addresses: []string{first.String()}}
	s.mu.Lock()
	v.created = s.now()
	s.networks[id] = v
	s.mu.Unlock()
	s.log.Info("network created", "net", id, "range", prefix.String())
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

// networkOr404 is the network id, or answers as yagna does for one the requestor does not own: 403 with
// an empty body while it owns other networks, 404 {"message":"Network not found"} when it owns none
// (core/vpn/src/network.rs VpnSupervisor::owner: Error::Forbidden / Error::NetNotFound, mapped in
// core/vpn/src/requestor.rs ApiError::error_response). The devnet has one identity, which owns every
// network. The caller holds s.mu.
func (s *Server) networkOr404(w http.ResponseWriter, id string) (*vpn, bool) {
	v, ok := s.networks[id]
	switch {
	case ok:
		return v, true
	case len(s.networks) > 0:
		w.WriteHeader(http.StatusForbidden)
	default:
		writeError(w, http.StatusNotFound, "Network not found")
	}
	return nil, false
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
	s.relay.dropVPN(v.id)
	writeNull(w)
}

func (s *Server) getAddresses(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	if !ok {
		return
	}
	// With the prefix, as yagna lists the stack's IpCidr addresses ("192.168.0.1/24": core/vpn/src/network.rs
	// Handler<GetAddresses>).
	out := []map[string]string{}
	for _, a := range v.addresses {
		out = append(out, map[string]string{"ip": a + "/" + strconv.Itoa(v.prefix.Bits())})
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
	// As yagna (core/vpn/src/network.rs Handler<AddAddress>): a bare address only (a CIDR is a 400), inside
	// the network; one the requestor already holds answers 200 again (Network::add_address inserts into
	// a set, never IpAddrTaken). The devnet keeps its own reserved addresses out (checkIP).
	if a, err := netip.ParseAddr(body.IP); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid IP address: invalid IP address syntax")
		return
	} else if !v.prefix.Contains(a) {
		writeError(w, http.StatusBadRequest, "Network not found for IP address: %s", a)
		return
	}
	addr, err := v.checkIP(body.IP)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if !slices.Contains(v.addresses, addr.String()) {
		if who, used := v.inUse(addr.String()); used {
			// yagna checks nothing here (the requestor's addresses and the nodes' are separate maps); the
			// node map still routes that address to its node, which a deploy checks (inUse).
			s.log.Info("requestor address also held by a node: taken, as yagna does", "network", v.id, "ip", addr, "holder", who)
		}
		v.addresses = append(v.addresses, addr.String())
	}
	writeNull(w)
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
		writeNull(w)
		return
	}
	v.nodes[body.ID] = append(v.nodes[body.ID], addr.String())
	writeNull(w)
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
		// yagna answers 200 for a node that is not there (core/vpn/src/network.rs Handler<RemoveNode>).
		s.mu.Unlock()
		writeNull(w)
		return
	}
	// All its addresses go (utils/networking/src/vpn/network.rs remove_node).
	delete(v.nodes, node)
	for _, act := range s.activities {
		if act.providerID != node || !slices.Contains(ips, act.nets[v.id]) {
			continue
		}
		// Also an activity whose provider crashed (its container gone, the activity not Terminated): the
		// tunnel must not take it for the holder of the address. Its packets go nowhere from now on.
		if a, err := netip.ParseAddr(act.nets[v.id]); err == nil {
			s.relay.unroute(v.id, a, act.link)
		}
		delete(act.nets, v.id)
	}
	s.mu.Unlock()
	writeNull(w)
}

// holder is the link of the running node that holds VPN address ip in v, or nil; the caller holds s.mu.
// An activity of a crashed provider has no container, and no link.
func (s *Server) holder(v *vpn, ip string) *vpnLink {
	for _, act := range s.activities {
		if act.state != "Terminated" && act.containerID != "" && act.nets[v.id] == ip && act.link != nil {
			return act.link
		}
	}
	return nil
}

// connectTCP is the websocket TCP tunnel: binary messages carry the bytes of a TCP connection to ip:port
// on the VPN, which devnet-init in the node holding ip dials there and streams over the relay's socket
// (vpnrelay.go). A connection that cannot be made answers 404 before the upgrade.
func (s *Server) connectTCP(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "port must be in 1..65535")
		return
	}
	s.mu.Lock()
	v, ok := s.networkOr404(w, r.PathValue("id"))
	var addr netip.Addr
	var link *vpnLink
	if ok {
		addr, err = netip.ParseAddr(r.PathValue("ip"))
		if err != nil || !v.prefix.Contains(addr) {
			writeError(w, http.StatusNotFound, "%s is not an address of network %s", r.PathValue("ip"), v.id)
			ok = false
		} else if link = s.holder(v, addr.String()); link == nil {
			writeError(w, http.StatusNotFound, "connecting to %s in network %s: no running node has that address", addr, v.id)
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	dctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	tcp, err := s.relay.dial(dctx, link, v.id, port)
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
		if c, ok := tcp.(interface{ CloseWrite() error }); ok {
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
