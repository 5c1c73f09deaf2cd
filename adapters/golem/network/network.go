// Package network is the golem-network adapter: one GAP-16 network is one
// VPN of the yagna Net API. It creates the VPN from the descriptor's range,
// gives the requestor its address in it, reports whether it still exists
// with the same range, and removes it.
package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Config is the resource config adapters/golem/lowering builds from a GAP-16 network.
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

// InitExt is the gcompose member of every Golem adapter's init answer: on
// the host network (yagna listens on the host's loopback), with the yagna
// variables, of which the app key is required (gcompose says it is missing
// once, before planning, instead of every call failing), and summary.
func InitExt(summary *protocol.Summary) *protocol.InitExt {
	return &protocol.InitExt{Network: "host", Env: EnvVars, EnvRequired: []string{"YAGNA_APPKEY"}, Summary: summary}
}

// Check is the check call of every Golem adapter: yagna answers at
// YAGNA_API_URL and accepts YAGNA_APPKEY. It asks for the requestor's
// payment accounts, which needs the key: GET /me does not on every yagna.
func Check(ctx context.Context, req *sdk.Request) error {
	yc, err := Client(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = yc.RequestorAccounts(ctx)
	var ae *yagna.APIError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return fmt.Errorf("yagna at %s refused YAGNA_APPKEY (%d %s): set it to a key of that yagna (yagna app-key list)", yc.BaseURL, ae.Status, http.StatusText(ae.Status))
	case errors.As(err, &ae):
		return fmt.Errorf("yagna at %s answered %d to GET /payment-api/v1/requestorAccounts: %s", yc.BaseURL, ae.Status, ae.Error())
	default:
		return fmt.Errorf("yagna does not answer at %s (YAGNA_API_URL): %v", yc.BaseURL, err)
	}
}

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
			Gcompose:     initExt(),
		}),
		Check:   Check,
		State:   state,
		Actions: map[string]sdk.ActionFunc{"create": create, "delete": remove, "address": address},
		Sweep:   sweep,
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
	have, same, err := sameRange(*cur, r, cfg.Gateway)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", cfg.Name, err)
	}
	if !same {
		return stale(protocol.ChangeRebuild, fmt.Sprintf("VPN %s is %s (gateway %s), the descriptor wants %s", cur.ID, have, cur.Gateway, r.Prefix),
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
		"network_id": cur.ID, "ip": have.Addr().String(), "mask": DottedMask(have.Bits()), "gateway": yagna.BareIP(cur.Gateway),
		"owner_ip": owner, "owner_id": me.Identity, "state": "ready",
	}}, nil
}

// sameRange tells whether the VPN cur has the range r (and the gateway, when
// one is asked for); have is its range. yagna answers the range in CIDR form
// ("ip": "192.168.0.0/24": core/vpn/src/network.rs create_network, an smoltcp
// IpCidr), other answers a bare address and the mask: the prefixes are
// compared, and the gateway as a bare address.
func sameRange(cur yagna.Network, r Range, gateway string) (have netip.Prefix, same bool, err error) {
	have, err = yagna.ParseNetworkIP(cur.IP, cur.Mask)
	if err != nil {
		return netip.Prefix{}, false, fmt.Errorf("VPN %s: %w", cur.ID, err)
	}
	if have != r.Prefix {
		return have, false, nil
	}
	return have, gateway == "" || yagna.BareIP(cur.Gateway) == yagna.BareIP(gateway), nil
}

// ownerIP is the requestor's address in the VPN (bare): the range's owner
// address when the requestor holds it, else the first it holds, else "".
// yagna lists them with the prefix ("192.168.0.1/24": core/vpn/src/network.rs
// Handler<GetAddresses>), and gives the requestor the first host at creation.
func ownerIP(ctx context.Context, yc *yagna.Client, id string, r Range) (string, error) {
	addrs, err := yc.Addresses(ctx, id)
	if err != nil {
		return "", fmt.Errorf("requestor addresses in VPN %s: %w", id, err)
	}
	for _, a := range addrs {
		if yagna.BareIP(a.IP) == r.OwnerIP.String() {
			return r.OwnerIP.String(), nil
		}
	}
	if len(addrs) > 0 {
		return yagna.BareIP(addrs[0].IP), nil
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
	// The range goes on record first: yagna's VPNs carry no tag, so it is all
	// a sweep has to recognise a VPN whose id an interrupted create never
	// reported.
	if err := req.ReportIdentity(map[string]any{"range": r.Prefix.String()}); err != nil {
		return err
	}
	n, err := yc.CreateNetwork(ctx, yagna.NewNetwork{IP: r.IP(), Mask: r.Mask(), Gateway: cfg.Gateway})
	if err != nil {
		return fmt.Errorf("network %s: creating VPN %s: %w", cfg.Name, r.Prefix, err)
	}
	if err := req.ReportIdentity(map[string]any{"network_id": n.ID}); err != nil || ctx.Err() != nil {
		// Not on record: undo rather than leave a VPN nobody knows.
		dctx, cancel := sdk.CleanupContext(ctx)
		defer cancel()
		_ = yc.DeleteNetwork(dctx, n.ID)
		if err == nil {
			err = ctx.Err()
		}
		return fmt.Errorf("network %s: VPN %s removed again: %w", cfg.Name, n.ID, err)
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

// sweep reports the VPNs that no state names but that have the range of one
// of the app's networks: yagna's VPNs carry neither tags nor a name
// (POST /net-api/v1/net takes ip, mask and gateway only), so such a VPN may
// as well be another app's with the same range; it is never removed here.
func sweep(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	q := req.SweepRequest()
	known := map[string]bool{}
	ranges := map[string]string{} // range -> resource
	for _, k := range q.Known {
		if id, _ := k.Identity["network_id"].(string); id != "" {
			known[id] = true
		}
		if rg, _ := k.Identity["range"].(string); rg != "" {
			ranges[rg] = k.Name
		}
	}
	if len(ranges) == 0 {
		return res, nil
	}
	yc, err := Client(req)
	if err != nil {
		return nil, err
	}
	nets, err := yc.Networks(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing VPNs: %w", err)
	}
	slices.SortFunc(nets, func(a, b yagna.Network) int { return strings.Compare(a.ID, b.ID) })
	for _, n := range nets {
		if known[n.ID] {
			continue
		}
		r, err := ParseRange(n.IP, n.Mask, "")
		if err != nil {
			continue
		}
		if resource, ok := ranges[r.Prefix.String()]; ok {
			res.Found = append(res.Found, protocol.Orphan{Kind: "vpn", ID: n.ID, Resource: resource, Action: protocol.OrphanReported,
				Detail: fmt.Sprintf("range %s, as %s; a VPN carries no tag, so it may be another app's (remove it with DELETE /net-api/v1/net/%s)", r.Prefix, resource, n.ID)})
		}
	}
	return res, nil
}
