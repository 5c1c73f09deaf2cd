package yagna

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// CreateNetwork creates a VPN (POST /net-api/v1/net → 200 Network). yagna
// answers the range in CIDR form ("ip": "192.168.0.0/24": core/vpn/src/network.rs
// VpnSupervisor::create_network, whose net_ip is an smoltcp IpCidr displayed
// as addr/len) and, without a gateway in the request, the first host as the
// gateway; read it with ParseNetworkIP.
func (c *Client) CreateNetwork(ctx context.Context, n NewNetwork) (Network, error) {
	var out Network
	err := c.do(ctx, request{method: http.MethodPost, path: NetPrefix + "/net", body: n, out: &out})
	return out, err
}

// GetNetwork fetches a VPN (GET /net/{id}); "ip" is in CIDR form, as CreateNetwork's.
func (c *Client) GetNetwork(ctx context.Context, networkID string) (Network, error) {
	var out Network
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID), out: &out})
	return out, ownedNet(networkID, err)
}

// Networks lists the requestor's VPNs (GET /net).
func (c *Client) Networks(ctx context.Context) ([]Network, error) {
	var out []Network
	err := c.do(ctx, request{method: http.MethodGet, path: NetPrefix + "/net", out: &out})
	return out, err
}

// DeleteNetwork removes a VPN (DELETE /net/{id} → 200 null; 404 when gone,
// see ownedNet).
func (c *Client) DeleteNetwork(ctx context.Context, networkID string) error {
	return ownedNet(networkID, c.do(ctx, request{method: http.MethodDelete, path: netPath(networkID)}))
}

// AddAddress assigns the requestor an address in a VPN (POST /net/{id}/addresses
// → 200 null). ip must be bare: yagna parses it as an IpAddr and answers 400
// "Invalid IP address" to a CIDR (core/vpn/src/network.rs Handler<AddAddress>),
// so a CIDR is stripped here. An address already assigned answers 200 as
// well: yagna keeps the addresses in a set (utils/networking/src/vpn/network.rs
// Network::add_address), never 409.
func (c *Client) AddAddress(ctx context.Context, networkID, ip string) error {
	return ownedNet(networkID, c.do(ctx, request{method: http.MethodPost, path: netPath(networkID) + "/addresses", body: Address{IP: BareIP(ip)}}))
}

// Addresses lists the requestor's addresses in a VPN (GET /net/{id}/addresses).
// yagna answers them with the prefix ("192.168.0.1/24": Handler<GetAddresses>
// displays the stack's IpCidr addresses), and the first host is the
// requestor's from the VPN's creation on (create_stack_network adds it);
// read them with BareIP.
func (c *Client) Addresses(ctx context.Context, networkID string) ([]Address, error) {
	var out []Address
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID) + "/addresses", out: &out})
	return out, ownedNet(networkID, err)
}

// AddNode adds a provider node to a VPN (POST /net/{id}/nodes → 200 null, also
// when the address is taken: Handler<AddNode> ignores IpAddrTaken, and the
// node that holds it keeps it). ip must be bare (utils/networking/src/vpn/common.rs
// to_ip), so a CIDR is stripped here.
func (c *Client) AddNode(ctx context.Context, networkID string, n Node) error {
	n.IP = BareIP(n.IP)
	return ownedNet(networkID, c.do(ctx, request{method: http.MethodPost, path: netPath(networkID) + "/nodes", body: n}))
}

// Nodes lists a VPN's nodes (GET /net/{id}/nodes); their addresses are bare
// (Handler<GetNodes> displays IpAddr).
func (c *Client) Nodes(ctx context.Context, networkID string) ([]Node, error) {
	var out []Node
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID) + "/nodes", out: &out})
	return out, ownedNet(networkID, err)
}

// RemoveNode removes a node from a VPN (DELETE /net/{id}/nodes/{nodeId} → 200
// null, also for a node that is not there: Handler<RemoveNode>).
func (c *Client) RemoveNode(ctx context.Context, networkID, nodeID string) error {
	return ownedNet(networkID, c.do(ctx, request{method: http.MethodDelete, path: netPath(networkID) + "/nodes/" + seg(nodeID)}))
}

// ownedNet reports yagna's 403 for a VPN as a 404 (IsNotFound), keeping the
// 403 in Answered. yagna answers 403 with an empty body for a VPN id the
// identity does not own while it owns others, and 404 only when it owns none
// (core/vpn/src/network.rs VpnSupervisor::owner → Error::Forbidden, mapped to
// HttpResponse::Forbidden().finish() in core/vpn/src/requestor.rs
// ApiError::error_response): a VPN removed (or never ours) answers 403 as
// soon as the requestor holds any other VPN. For the requestor it is gone
// either way.
func ownedNet(networkID string, err error) error {
	ae, ok := err.(*APIError)
	if !ok || ae.Status != http.StatusForbidden {
		return err
	}
	cp := *ae
	cp.Status, cp.Answered = http.StatusNotFound, http.StatusForbidden
	cp.Message = "VPN " + networkID + " is not the requestor's (yagna answers 403 for a VPN id it does not own while it owns others): gone"
	return &cp
}

// BareIP is the address of ip without a prefix length: "192.168.0.1/24" →
// "192.168.0.1"; a bare address, or text that is neither, comes back trimmed.
// yagna answers the requestor's addresses and a VPN's range with the prefix
// (see Addresses, GetNetwork) and the nodes bare; the exe-unit takes only bare
// addresses as net[].nodes keys and nodeIp (exe-unit/src/state.rs
// Deployment::extend_networks, map_nodes → to_ip), as golem-js strips them
// (src/network/network.ts).
func BareIP(ip string) string {
	ip = strings.TrimSpace(ip)
	if p, err := netip.ParsePrefix(ip); err == nil {
		return p.Addr().String()
	}
	if a, err := netip.ParseAddr(ip); err == nil {
		return a.String()
	}
	return ip
}

// ParseNetworkIP reads a VPN's "ip" and "mask" as yagna answers them (CIDR
// "192.168.0.0/24", the mask then redundant) or as older answers and
// requests carry them (a bare "192.168.0.0" and the dotted mask; /24 when
// there is no mask, as yagna's DEFAULT_IPV4_NET_MASK in
// utils/networking/src/vpn/common.rs to_net) into the network's prefix.
func ParseNetworkIP(ip, mask string) (netip.Prefix, error) {
	ip = strings.TrimSpace(ip)
	if strings.Contains(ip, "/") {
		p, err := netip.ParsePrefix(ip)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("VPN ip %q: %w", ip, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("VPN ip %q: %w", ip, err)
	}
	bits := 24
	if mask = strings.TrimSpace(mask); mask != "" {
		m, err := netip.ParseAddr(mask)
		if err != nil || !m.Is4() {
			return netip.Prefix{}, fmt.Errorf("VPN mask %q: want a dotted IPv4 mask", mask)
		}
		b := m.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		bits = 0
		for v&(1<<31) != 0 {
			bits++
			v <<= 1
		}
		if v != 0 {
			return netip.Prefix{}, fmt.Errorf("VPN mask %q is not contiguous", mask)
		}
	}
	return netip.PrefixFrom(a, bits).Masked(), nil
}

func netPath(networkID string) string { return NetPrefix + "/net/" + seg(networkID) }

// TCPURL is the websocket URL of GET /net/{id}/tcp/{ip}/{port} (yagna has no
// GET /net/{id}/tcp listing: core/vpn/src/requestor.rs vpn_web_scope): the base URL
// with ws/wss instead of http/https. It carries no credentials (DialTCP sends
// the app key in the Authorization header).
func (c *Client) TCPURL(networkID, ip string, port int) (string, error) {
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("tcp port %d out of range 1..65535", port)
	}
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("tcp address %q is not an IP", ip)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return "", fmt.Errorf("yagna base URL: %w", err)
	}
	switch u.Scheme {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("yagna base URL scheme %q: want http or https", u.Scheme)
	}
	tail := "/tcp/" + ip + "/" + strconv.Itoa(port)
	base := strings.TrimRight(u.EscapedPath(), "/")
	u.Path = strings.TrimRight(u.Path, "/") + NetPrefix + "/net/" + networkID + tail
	u.RawPath = base + netPath(networkID) + tail
	u.RawQuery = ""
	return u.String(), nil
}

// DialTCP opens the websocket that tunnels a TCP connection to ip:port inside a
// VPN. Bytes travel as binary messages.
func (c *Client) DialTCP(ctx context.Context, networkID, ip string, port int) (*websocket.Conn, error) {
	u, err := c.TCPURL(networkID, ip, port)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if c.AppKey != "" {
		h.Set("Authorization", "Bearer "+c.AppKey)
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: c.HTTP, HTTPHeader: h})
	if err != nil {
		path := netPath(networkID) + "/tcp/" + ip + "/" + strconv.Itoa(port)
		if resp != nil && resp.StatusCode >= 300 {
			return nil, &APIError{Status: resp.StatusCode, Message: c.redact(err.Error()), Method: http.MethodGet, Path: path}
		}
		return nil, c.redactErr(fmt.Errorf("yagna websocket %s: %w", path, err))
	}
	conn.SetReadLimit(-1)
	return conn, nil
}

// DialTCPConn is DialTCP wrapped as a net.Conn; ctx bounds the dial and the
// connection's life.
func (c *Client) DialTCPConn(ctx context.Context, networkID, ip string, port int) (net.Conn, error) {
	conn, err := c.DialTCP(ctx, networkID, ip, port)
	if err != nil {
		return nil, err
	}
	return websocket.NetConn(ctx, conn, websocket.MessageBinary), nil
}
