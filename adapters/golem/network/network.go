// Package network is the golem-network adapter: one GAP-16 network is one
// VPN of the yagna Net API. It creates the VPN from the descriptor's range,
// gives the requestor its address in it, reports whether it still exists
// with the same range, and removes it.
package network

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Config is the resource config core/desired builds from a GAP-16 network.
type Config struct {
	Name    string `json:"name"`
	IP      string `json:"ip"`
	OwnerIP string `json:"owner_ip,omitempty"`
	Mask    string `json:"mask,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// Range parses the config's address range.
func (c Config) Range() (Range, error) { return ParseRange(c.IP, c.Mask, c.OwnerIP) }

// EnvVars are the variables every Golem adapter asks gcompose for: they
// arrive on stdin only (protocol.RequestExt.Env).
var EnvVars = []string{"YAGNA_API_URL", "YAGNA_APPKEY"}

// Client builds the yagna client from the values gcompose sent on stdin.
func Client(req *sdk.Request) (*yagna.Client, error) {
	env := map[string]string{}
	if req.Gcompose != nil {
		env = req.Gcompose.Env
	}
	c, err := yagna.FromEnvFunc(func(k string) string { return env[k] })
	if err != nil {
		return nil, fmt.Errorf("yagna connection (set YAGNA_API_URL and YAGNA_APPKEY where gcompose runs): %w", err)
	}
	c.Logger = req.Log
	return c, nil
}

const configSchema = `{
  "type": "object",
  "required": ["name", "ip"],
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "ip": {"type": "string", "minLength": 1, "description": "CIDR (192.168.0.0/24) or host/prefix (192.168.0.1/24)"},
    "owner_ip": {"type": "string"},
    "mask": {"type": "string"},
    "gateway": {"type": "string"}
  }
}`

// Adapter is the golem-network adapter.
func Adapter() sdk.Adapter {
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			ConfigSchema: json.RawMessage(configSchema),
			Gcompose:     &protocol.InitExt{Network: "host", Env: EnvVars},
		}),
		State:   state,
		Actions: map[string]sdk.ActionFunc{"create": create, "delete": remove, "address": address},
	}
}

// Identity is what the network adapter persists: the VPN's id.
type Identity struct {
	NetworkID string `json:"network_id"`
}

func identityOf(req *sdk.Request) Identity {
	id, _ := req.Persisted().Identity["network_id"].(string)
	return Identity{NetworkID: id}
}

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	yc, err := Client(req)
	if err != nil {
		return nil, err
	}
	id := identityOf(req)
	var cur *yagna.Network
	if id.NetworkID != "" {
		n, err := yc.GetNetwork(ctx, id.NetworkID)
		switch {
		case err == nil:
			cur = &n
		case yagna.IsNotFound(err):
		default:
			return nil, fmt.Errorf("network %s: reading VPN %s: %w", cfg.Name, id.NetworkID, err)
		}
	}
	ident := map[string]any{}
	if cur != nil {
		ident["network_id"] = cur.ID
	}
	if req.Desired() == protocol.Absent {
		if cur == nil {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return stale(protocol.ChangeDelete, "VPN "+cur.ID+" exists", nil, ident, "delete"), nil
	}
	r, err := cfg.Range()
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", cfg.Name, err)
	}
	if cur == nil {
		reason := "no VPN yet"
		if id.NetworkID != "" {
			reason = "VPN " + id.NetworkID + " is gone"
		}
		return stale(protocol.ChangeCreate, reason, nil, ident, "create"), nil
	}
	if cur.IP != r.IP() || cur.Mask != r.Mask() || (cfg.Gateway != "" && cur.Gateway != cfg.Gateway) {
		return stale(protocol.ChangeRebuild, fmt.Sprintf("VPN %s is %s/%s, the descriptor wants %s", cur.ID, cur.IP, cur.Mask, r.Prefix),
			[]string{"/ip"}, ident, "delete", "create"), nil
	}
	owner, err := ownerIP(ctx, yc, cur.ID, r)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", cfg.Name, err)
	}
	if owner == "" {
		// The VPN lost the requestor's address (or a create was cut short
		// before adding it): add it again.
		return stale(protocol.ChangeUpdate, "the requestor has no address in VPN "+cur.ID, nil, ident, "address"), nil
	}
	if owner != r.OwnerIP.String() && cfg.OwnerIP != "" {
		return stale(protocol.ChangeRebuild, fmt.Sprintf("the requestor is %s in VPN %s, the descriptor wants %s", owner, cur.ID, r.OwnerIP),
			[]string{"/owner_ip"}, ident, "delete", "create"), nil
	}
	me, err := yc.Me(ctx)
	if err != nil {
		return nil, fmt.Errorf("network %s: requestor identity: %w", cfg.Name, err)
	}
	return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{
		"network_id": cur.ID, "ip": cur.IP, "mask": cur.Mask, "gateway": cur.Gateway,
		"owner_ip": owner, "owner_id": me.Identity, "state": "ready",
	}}, nil
}

func ownerIP(ctx context.Context, yc *yagna.Client, id string, r Range) (string, error) {
	addrs, err := yc.Addresses(ctx, id)
	if err != nil {
		return "", fmt.Errorf("requestor addresses in VPN %s: %w", id, err)
	}
	for _, a := range addrs {
		if a.IP == r.OwnerIP.String() {
			return a.IP, nil
		}
	}
	if len(addrs) > 0 {
		return addrs[0].IP, nil
	}
	return "", nil
}

func stale(change, reason string, forces []string, identity map[string]any, actions ...string) *protocol.StateResult {
	res := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Reason: reason, Forces: forces}}
	if len(identity) > 0 {
		res.Gcompose.Identity = identity
	}
	for _, a := range actions {
		res.Actions = append(res.Actions, protocol.ActionSpec{Name: a})
	}
	return res
}

func create(ctx context.Context, req *sdk.Request) error {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return err
	}
	r, err := cfg.Range()
	if err != nil {
		return fmt.Errorf("network %s: %w", cfg.Name, err)
	}
	yc, err := Client(req)
	if err != nil {
		return err
	}
	n, err := yc.CreateNetwork(ctx, yagna.NewNetwork{IP: r.IP(), Mask: r.Mask(), Gateway: cfg.Gateway})
	if err != nil {
		return fmt.Errorf("network %s: creating VPN %s: %w", cfg.Name, r.Prefix, err)
	}
	if err := req.ReportIdentity(map[string]any{"network_id": n.ID}); err != nil {
		return err
	}
	if err := yc.AddAddress(ctx, n.ID, r.OwnerIP.String()); err != nil {
		return fmt.Errorf("network %s: requestor address %s in VPN %s: %w", cfg.Name, r.OwnerIP, n.ID, err)
	}
	req.Printf("VPN %s created: %s, requestor at %s", n.ID, r.Prefix, r.OwnerIP)
	return nil
}

// address re-adds the requestor's address to an existing VPN.
func address(ctx context.Context, req *sdk.Request) error {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return err
	}
	r, err := cfg.Range()
	if err != nil {
		return fmt.Errorf("network %s: %w", cfg.Name, err)
	}
	yc, err := Client(req)
	if err != nil {
		return err
	}
	id := identityOf(req).NetworkID
	if err := yc.AddAddress(ctx, id, r.OwnerIP.String()); err != nil {
		return fmt.Errorf("network %s: requestor address %s in VPN %s: %w", cfg.Name, r.OwnerIP, id, err)
	}
	return nil
}

func remove(ctx context.Context, req *sdk.Request) error {
	id := identityOf(req).NetworkID
	if id == "" {
		return nil
	}
	yc, err := Client(req)
	if err != nil {
		return err
	}
	if err := yc.DeleteNetwork(ctx, id); err != nil && !yagna.IsNotFound(err) {
		return fmt.Errorf("removing VPN %s: %w", id, err)
	}
	req.Printf("VPN %s removed", id)
	return nil
}
