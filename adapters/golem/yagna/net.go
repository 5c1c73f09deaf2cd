package yagna

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coder/websocket"
)

// CreateNetwork creates a VPN (POST /net-api/v1/net → 200 Network).
func (c *Client) CreateNetwork(ctx context.Context, n NewNetwork) (Network, error) {
	var out Network
	err := c.do(ctx, request{method: http.MethodPost, path: NetPrefix + "/net", body: n, out: &out})
	return out, err
}

// GetNetwork fetches a VPN (GET /net/{id}).
func (c *Client) GetNetwork(ctx context.Context, networkID string) (Network, error) {
	var out Network
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID), out: &out})
	return out, err
}

// Networks lists the requestor's VPNs (GET /net).
func (c *Client) Networks(ctx context.Context) ([]Network, error) {
	var out []Network
	err := c.do(ctx, request{method: http.MethodGet, path: NetPrefix + "/net", out: &out})
	return out, err
}

// DeleteNetwork removes a VPN (DELETE /net/{id} → 200; 404 when already gone).
func (c *Client) DeleteNetwork(ctx context.Context, networkID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: netPath(networkID)})
}

// AddAddress assigns the requestor an address in a VPN (POST /net/{id}/addresses
// → 200; 409 when taken).
func (c *Client) AddAddress(ctx context.Context, networkID, ip string) error {
	return c.do(ctx, request{method: http.MethodPost, path: netPath(networkID) + "/addresses", body: Address{IP: ip}})
}

// Addresses lists the requestor's addresses in a VPN (GET /net/{id}/addresses).
func (c *Client) Addresses(ctx context.Context, networkID string) ([]Address, error) {
	var out []Address
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID) + "/addresses", out: &out})
	return out, err
}

// AddNode adds a provider node to a VPN (POST /net/{id}/nodes → 200; 409 when
// the address is taken).
func (c *Client) AddNode(ctx context.Context, networkID string, n Node) error {
	return c.do(ctx, request{method: http.MethodPost, path: netPath(networkID) + "/nodes", body: n})
}

// Nodes lists a VPN's nodes (GET /net/{id}/nodes).
func (c *Client) Nodes(ctx context.Context, networkID string) ([]Node, error) {
	var out []Node
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID) + "/nodes", out: &out})
	return out, err
}

// RemoveNode removes a node from a VPN (DELETE /net/{id}/nodes/{nodeId} → 200).
func (c *Client) RemoveNode(ctx context.Context, networkID, nodeID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: netPath(networkID) + "/nodes/" + seg(nodeID)})
}

// Connections lists the requestor's TCP connections in a VPN (GET /net/{id}/tcp).
func (c *Client) Connections(ctx context.Context, networkID string) ([]Connection, error) {
	var out []Connection
	err := c.do(ctx, request{method: http.MethodGet, path: netPath(networkID) + "/tcp", out: &out})
	return out, err
}

func netPath(networkID string) string { return NetPrefix + "/net/" + seg(networkID) }

// TCPURL is the websocket URL of GET /net/{id}/tcp/{ip}/{port}: the base URL
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
