// Package proxy is the golem-proxy adapter: the local HTTP/TCP proxies of a
// service's http_proxy / tcp_proxy (and GAP-16's local-http-proxy runtime).
// One resource runs one long-lived container on the host network that
// listens on 127.0.0.1 and tunnels every connection to the service's node
// through the Net API websocket (GET /net-api/v1/net/{id}/tcp/{ip}/{port}).
package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Config is the proxy resource config adapters/golem/lowering builds.
type Config struct {
	// App is the application; the one gcompose sends wins.
	App     string `json:"app,omitempty"`
	Service string `json:"service"`
	// NetworkID and IP are the service node's VPN and address (references
	// to the network's and the service's outputs).
	NetworkID string `json:"network_id"`
	IP        string `json:"ip"`
	// HTTP and TCP are GAP-16 port entries: "80" (a free local port) or
	// "8080:80" (local 8080 to remote 80).
	HTTP []string `json:"http,omitempty"`
	TCP  []string `json:"tcp,omitempty"`
}

// Mapping is one proxied port.
type Mapping struct {
	Kind   string `json:"kind"` // http or tcp
	Local  int    `json:"local"`
	Remote int    `json:"remote"`
}

// Key names a mapping independently of its local port.
func (m Mapping) Key() string { return m.Kind + ":" + strconv.Itoa(m.Remote) }

// ParsePort reads "80" (local 0: pick a free port) or "8080:80".
func ParsePort(s string) (local, remote int, err error) {
	l, r, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		r, l = l, "0"
	}
	local, err1 := strconv.Atoi(l)
	remote, err2 := strconv.Atoi(r)
	if err1 != nil || err2 != nil || remote < 1 || remote > 65535 || local < 0 || local > 65535 {
		return 0, 0, fmt.Errorf("port %q: want \"REMOTE\" or \"LOCAL:REMOTE\" (1-65535)", s)
	}
	return local, remote, nil
}

// Mappings lists the config's ports, as asked (Local 0 = any).
func (c Config) Mappings() ([]Mapping, error) {
	var out []Mapping
	for _, set := range []struct {
		kind  string
		ports []string
	}{{"http", c.HTTP}, {"tcp", c.TCP}} {
		for _, p := range set.ports {
			l, r, err := ParsePort(p)
			if err != nil {
				return nil, fmt.Errorf("%s_proxy of %s: %w", set.kind, c.Service, err)
			}
			out = append(out, Mapping{Kind: set.kind, Local: l, Remote: r})
		}
	}
	return out, nil
}

const configSchema = `{
  "type": "object",
  "required": ["service", "network_id", "ip"],
  "properties": {
    "app": {"type": "string"},
    "service": {"type": "string", "minLength": 1},
    "network_id": {"type": "string", "minLength": 1},
    "ip": {"type": "string", "minLength": 1},
    "http": {"type": "array", "items": {"type": "string"}},
    "tcp": {"type": "array", "items": {"type": "string"}}
  }
}`

// ProxyArg runs the image as the proxy.
const ProxyArg = "proxy"

// Adapter is the golem-proxy adapter.
func Adapter() sdk.Adapter {
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			Plugs:        map[string]protocol.PlugSpec{payments.DockerPlug: {ContainerPath: payments.DockerSocket}},
			ConfigSchema: json.RawMessage(configSchema),
			// gcompose prints the URL after a deploy as the endpoint of the
			// service the proxy is in front of, and shows it in ps.
			Gcompose: initExt(network.InitExt(&protocol.Summary{URL: "/url", For: "/service"})),
		}),
		Check:   network.Check,
		State:   state,
		Actions: map[string]sdk.ActionFunc{"create": create, "delete": remove},
		Sweep:   sweep,
		NoServe: true,
	}
}

// sweep removes the app's proxy containers (of this image and lineage) whose
// resource the state does not have; another lineage's are only reported.
func sweep(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	q := req.SweepRequest()
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	if req.App() == "" {
		return res, nil
	}
	names := map[string]bool{}
	for _, k := range q.Known {
		names[k.Name] = true
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	node, err := longlived.Node(ctx, yc)
	if err != nil {
		return nil, err
	}
	d, err := longlived.Docker()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	found, err := longlived.Sweep(ctx, d, req.App(), req.Lineage(), req.Type, "proxy", node, names, q.Terminates)
	if err != nil {
		return nil, err
	}
	res.Found = found
	return res, nil
}

func decode(req *sdk.Request) (Config, error) {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return cfg, err
	}
	if a := req.App(); a != "" {
		cfg.App = a
	}
	if cfg.App == "" {
		return cfg, fmt.Errorf("%s: no application name", req.Name)
	}
	return cfg, nil
}

// chosen are the local ports picked before (identity "ports": key -> port).
func chosen(req *sdk.Request) map[string]int {
	out := map[string]int{}
	m, _ := req.Persisted().Identity["ports"].(map[string]any)
	for k, v := range m {
		if f, ok := v.(float64); ok {
			out[k] = int(f)
		}
	}
	return out
}

// fingerprint is what the running container must have been started for.
func fingerprint(cfg Config, maps []Mapping) string {
	return longlived.Fingerprint(map[string]any{"network_id": cfg.NetworkID, "ip": cfg.IP, "maps": maps})
}

// resolved applies the chosen local ports to the mappings.
func resolved(maps []Mapping, ch map[string]int) ([]Mapping, bool) {
	out := make([]Mapping, len(maps))
	all := true
	for i, m := range maps {
		if m.Local == 0 {
			m.Local = ch[m.Key()]
			if m.Local == 0 {
				all = false
			}
		}
		out[i] = m
	}
	return out, all
}

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	cfg, err := decode(req)
	if err != nil {
		return nil, err
	}
	d, err := longlived.Docker()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	c, err := longlived.Find(ctx, d, cfg.App, req.Lineage(), req.Name)
	if err != nil {
		return nil, err
	}
	if req.Desired() == protocol.Absent {
		if c == nil {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return stale(protocol.ChangeDelete, "proxy container "+c.ID[:12]+" exists", "delete"), nil
	}
	asked, err := cfg.Mappings()
	if err != nil {
		return nil, err
	}
	maps, all := resolved(asked, chosen(req))
	switch {
	case c == nil:
		return stale(protocol.ChangeCreate, "no proxy container", "create"), nil
	case !c.Running:
		return stale(protocol.ChangeRebuild, "the proxy container is "+c.State, "delete", "create"), nil
	case !all || c.Config != fingerprint(cfg, maps):
		return stale(protocol.ChangeRebuild, "the proxy runs for another node or ports ("+cfg.IP+")", "delete", "create"), nil
	}
	out := outputs(maps, c.ID[:12], cfg.IP, cfg.Service)
	return &protocol.StateResult{Status: protocol.Valid, State: out}, nil
}

// outputs is a running proxy's VALID state. Every port has a url: http://
// for http ports, tcp:// for tcp ones (a database client takes it as is);
// the top-level url is the first http port's, else the first tcp port's, so
// that `gcompose output` and ps show an address for a TCP-only proxy too.
func outputs(maps []Mapping, container, target, service string) map[string]any {
	ports := make([]any, 0, len(maps))
	first := map[string]string{}
	for _, m := range maps {
		address := "127.0.0.1:" + strconv.Itoa(m.Local)
		url := "tcp://" + address
		if m.Kind == "http" {
			url = "http://" + address + "/"
		}
		if first[m.Kind] == "" {
			first[m.Kind] = url
		}
		ports = append(ports, map[string]any{"kind": m.Kind, "local": m.Local, "remote": m.Remote, "address": address, "url": url})
	}
	out := map[string]any{"ports": ports, "container": container, "state": "running", "target": target, "service": service}
	if u := first["http"]; u != "" {
		out["url"] = u
	} else if u := first["tcp"]; u != "" {
		out["url"] = u
	}
	return out
}

func stale(change, reason string, actions ...string) *protocol.StateResult {
	res := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Reason: reason}}
	if change != protocol.ChangeDelete {
		res.Gcompose.Unknown = []string{"/ports", "/url", "/container"}
	}
	for _, a := range actions {
		res.Actions = append(res.Actions, protocol.ActionSpec{Name: a})
	}
	return res
}

// freePort asks the kernel for a free loopback port; prefer, when set and
// still free, keeps the URL stable across rebuilds.
func freePort(prefer int) (int, error) {
	if prefer > 0 {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(prefer)); err == nil {
			l.Close()
			return prefer, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free local port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func create(ctx context.Context, req *sdk.Request) error {
	cfg, err := decode(req)
	if err != nil {
		return err
	}
	asked, err := cfg.Mappings()
	if err != nil {
		return err
	}
	prev := chosen(req)
	ch := map[string]any{}
	maps := make([]Mapping, len(asked))
	for i, m := range asked {
		if m.Local == 0 {
			p, err := freePort(prev[m.Key()])
			if err != nil {
				return fmt.Errorf("proxy of %s: %w", cfg.Service, err)
			}
			m.Local = p
			ch[m.Key()] = p
		}
		maps[i] = m
	}
	if err := req.ReportIdentity(map[string]any{"ports": ch}); err != nil {
		return err
	}
	args := []string{ProxyArg, "--network", cfg.NetworkID, "--ip", cfg.IP}
	for _, m := range maps {
		args = append(args, "--map", fmt.Sprintf("%s:127.0.0.1:%d=%d", m.Kind, m.Local, m.Remote))
	}
	id, err := longlived.Replace(ctx, req, "proxy of "+cfg.Service, "", longlived.Spec{
		App: cfg.App, Args: args, Secrets: req.Gcompose.Env,
		Config: map[string]any{"network_id": cfg.NetworkID, "ip": cfg.IP, "maps": maps},
	}, 30*time.Second)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(maps))
	for _, m := range maps {
		keys = append(keys, fmt.Sprintf("%s 127.0.0.1:%d -> %s:%d", m.Kind, m.Local, cfg.IP, m.Remote))
	}
	sort.Strings(keys)
	req.Printf("proxy %s of %s: %s", id[:12], cfg.Service, strings.Join(keys, ", "))
	return nil
}

func remove(ctx context.Context, req *sdk.Request) error {
	cfg, err := decode(req)
	if err != nil {
		return err
	}
	d, err := longlived.Docker()
	if err != nil {
		return err
	}
	defer d.Close()
	if err := longlived.Remove(ctx, d, cfg.App, req.Lineage(), req.Name); err != nil {
		return fmt.Errorf("proxy of %s: %w", cfg.Service, err)
	}
	req.Printf("proxy of %s removed", cfg.Service)
	return nil
}
