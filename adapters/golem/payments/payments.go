// Package payments is the golem-payments adapter: the resource that pays for
// a Golem app. It creates the app's allocation (its budget) and runs the
// app's payments keeper, a long-lived container that accepts the debit notes
// and invoices of the app's agreements against that allocation for as long
// as the app runs (providers terminate agreements whose debit notes go
// unanswered). Destroy stops the keeper and releases the allocation.
package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Config is the payments resource config adapters/golem/lowering builds.
type Config struct {
	// App is the application; gcompose sends it with every call, and that
	// one wins.
	App string `json:"app,omitempty"`
	// Budget is the allocation's total amount (GLM, a decimal string).
	Budget string `json:"budget"`
	// Platform is the payment platform (erc20-hoodi-tglm, erc20-polygon-glm);
	// empty: the first of the requestor's funded testnet accounts.
	Platform string `json:"platform,omitempty"`
	// Address is the paying address; empty lets yagna use the default one.
	Address string `json:"address,omitempty"`
	// AllocationTimeout is how long the allocation outlives its keeper (a
	// Go duration, default 24h): the keeper keeps moving it ahead.
	AllocationTimeout string `json:"allocation_timeout,omitempty"`
}

// DockerPlug is the plug name under which Golem adapters that run
// long-lived containers ask for the Docker socket.
const DockerPlug = "golem-docker-socket"

// DockerSocket is where that plug is mounted in the adapter container.
const DockerSocket = "/var/run/docker.sock"

const configSchema = `{
  "type": "object",
  "required": ["budget"],
  "properties": {
    "app": {"type": "string"},
    "budget": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"},
    "platform": {"type": "string"},
    "address": {"type": "string"},
    "allocation_timeout": {"type": "string"}
  }
}`

// KeepArg is the argument that runs the image as the keeper.
const KeepArg = "keep"

// Adapter is the golem-payments adapter.
func Adapter() sdk.Adapter {
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			Plugs:        map[string]protocol.PlugSpec{DockerPlug: {ContainerPath: DockerSocket}},
			ConfigSchema: json.RawMessage(configSchema),
			Gcompose:     initExt(network.InitExt(nil)),
		}),
		Check:   check,
		State:   state,
		Actions: map[string]sdk.ActionFunc{"create": create, "keeper": keeper, "amend": amend, "delete": remove},
		Sweep:   sweep,
		// Served: every call reads what it works on from its request (the
		// yagna client, the Docker client and the config are made per
		// call) and the keeper and the market watcher are containers of
		// their own, started through the Docker socket, so they outlive
		// the server as they outlived a one-shot call.
	}
}

// decode reads the config; the app is the one gcompose names.
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

func allocationID(req *sdk.Request) string {
	id, _ := req.Persisted().Identity["allocation_id"].(string)
	return id
}

// keeperConfig is what the keeper container is started for.
func keeperConfig(cfg Config, alloc string) map[string]string {
	m := map[string]string{"app": cfg.App, "allocation": alloc}
	if cfg.AllocationTimeout != "" {
		m["allocation_timeout"] = cfg.AllocationTimeout
	}
	return m
}

// adopted carries an allocation found by its tags from the state call to the
// actions, which record it.
type adopted struct {
	AllocationID string `json:"allocation_id,omitempty"`
}

func state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	cfg, err := decode(req)
	if err != nil {
		return nil, err
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	d, err := longlived.Docker()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	id := allocationID(req)
	var alloc *yagna.Allocation
	if id != "" {
		a, err := yc.GetAllocation(ctx, id)
		switch {
		case err == nil:
			alloc = &a
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		default:
			return nil, fmt.Errorf("payments %s: reading allocation %s: %w", cfg.App, id, err)
		}
	}
	// Every plan and deploy of a Golem app asks this first: the market
	// watcher is started (or adopted) for the service estimates that follow.
	// Only there: not for a destroy (nothing is rented) nor a refresh (ps,
	// cost, refresh and a reconciler's check estimate and rent nothing; a
	// watcher they started would run its 15 idle minutes for nobody). Nor
	// once the allocation recorded is gone: the state call that checks a
	// delete (the watcher was released) or an allocation lost, whose
	// rebuild's plan starts it.
	if req.Desired() == protocol.Present && !req.Refreshing() && (id == "" || alloc != nil) {
		ensureWatcher(ctx, req, cfg.App)
	}
	c, err := longlived.Find(ctx, d, cfg.App, req.Lineage(), req.Name)
	if err != nil {
		return nil, err
	}
	var found *adopted
	if alloc == nil {
		// An interrupted create may have made the allocation without
		// recording it: found by its tagged timeout, it is adopted.
		a, err := adopt(ctx, yc, req)
		if err != nil {
			return nil, fmt.Errorf("payments %s: looking for the allocation of an interrupted create: %w", cfg.App, err)
		}
		if a != nil {
			alloc, found = a, &adopted{AllocationID: a.AllocationID}
		}
	}
	if req.Desired() == protocol.Absent {
		if alloc == nil && c == nil {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return withAdopted(stale(protocol.ChangeDelete, "allocation or keeper still there", nil, "delete"), found)
	}
	if alloc == nil {
		reason := "no allocation yet"
		if id != "" {
			reason = "allocation " + id + " is gone"
		}
		return stale(protocol.ChangeCreate, reason, []string{"/allocation_id", "/keeper"}, "create"), nil
	}
	platform := cfg.Platform
	if alloc.PaymentPlatform != nil && alloc.PaymentPlatform.Name != "" {
		platform = alloc.PaymentPlatform.Name
	}
	if cfg.Platform != "" && platform != cfg.Platform {
		// An allocation's platform cannot be changed: release it, allocate anew.
		res := stale(protocol.ChangeRebuild, fmt.Sprintf("platform %s, allocation %s is on %s", cfg.Platform, alloc.AllocationID, platform), []string{"/allocation_id", "/platform", "/keeper"}, "delete", "create")
		res.Gcompose.Forces = []string{"/platform"}
		return res, nil
	}
	if !sameAmount(alloc.TotalAmount, cfg.Budget) {
		return stale(protocol.ChangeUpdate, fmt.Sprintf("budget %s, allocation has %s", cfg.Budget, alloc.TotalAmount), nil, "amend"), nil
	}
	if c == nil || !c.Running || c.Config != longlived.Fingerprint(keeperConfig(cfg, alloc.AllocationID)) {
		why := "the payments keeper is not running"
		if c != nil && c.Running {
			why = "the payments keeper runs for another allocation"
		} else if c != nil {
			why = "the payments keeper is " + c.State
		}
		if found != nil {
			why = "adopting allocation " + found.AllocationID + " of an interrupted create; " + why
		}
		return withAdopted(stale(protocol.ChangeUpdate, why, []string{"/keeper"}, "keeper"), found)
	}
	// The amounts spent and remaining change with every accepted debit note;
	// outputs hold only what identifies the resource, or every refresh would
	// report them as drift and every deploy would rewrite the state.
	res := &protocol.StateResult{Status: protocol.Valid, State: map[string]any{
		"allocation_id": alloc.AllocationID, "budget": alloc.TotalAmount,
		"platform": platform, "keeper": c.ID[:12], "state": "running",
	}}
	if found != nil {
		res.Gcompose = &protocol.StateExt{Identity: map[string]any{"allocation_id": found.AllocationID}}
	}
	return res, nil
}

// withAdopted hands an adopted allocation to the actions of a STALE answer.
func withAdopted(res *protocol.StateResult, found *adopted) (*protocol.StateResult, error) {
	if found == nil {
		return res, nil
	}
	raw, err := sdk.StaleState(found)
	if err != nil {
		return nil, err
	}
	res.StaleState = raw
	return res, nil
}

// recordAdopted records an allocation the state call adopted, and returns
// the allocation id the action works on.
func recordAdopted(req *sdk.Request) (string, error) {
	if id := allocationID(req); id != "" {
		return id, nil
	}
	var a adopted
	if err := req.DecodeStaleState(&a); err != nil || a.AllocationID == "" {
		return "", err
	}
	if err := req.ReportIdentity(map[string]any{"allocation_id": a.AllocationID}); err != nil {
		return "", err
	}
	req.Gcompose.Persisted = withIdentity(req.Persisted(), "allocation_id", a.AllocationID)
	req.Printf("allocation %s of an interrupted create adopted", a.AllocationID)
	return a.AllocationID, nil
}

func sameAmount(a, b string) bool {
	var x, y float64
	_, e1 := fmt.Sscanf(a, "%g", &x)
	_, e2 := fmt.Sscanf(b, "%g", &y)
	return e1 == nil && e2 == nil && x == y
}

func stale(change, reason string, unknown []string, actions ...string) *protocol.StateResult {
	res := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Reason: reason, Unknown: unknown}}
	for _, a := range actions {
		res.Actions = append(res.Actions, protocol.ActionSpec{Name: a})
	}
	return res
}

func create(ctx context.Context, req *sdk.Request) error {
	cfg, err := decode(req)
	if err != nil {
		return err
	}
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	ttl, err := cfg.allocationTimeout()
	if err != nil {
		return fmt.Errorf("payments %s: %w", cfg.App, err)
	}
	a, err := allocate(ctx, yc, cfg, tagTimeout(req, ttl))
	if err != nil {
		return fmt.Errorf("payments %s: %w", cfg.App, err)
	}
	if err := req.ReportIdentity(map[string]any{"allocation_id": a.AllocationID}); err != nil {
		return err
	}
	platform := cfg.Platform
	if a.PaymentPlatform != nil && a.PaymentPlatform.Name != "" {
		platform = a.PaymentPlatform.Name
	}
	req.Printf("allocation %s: %s GLM on %s", a.AllocationID, a.TotalAmount, platform)
	req.Gcompose.Persisted = withIdentity(req.Persisted(), "allocation_id", a.AllocationID)
	return keeper(ctx, req)
}

func withIdentity(p protocol.Persisted, k string, v any) *protocol.Persisted {
	id := map[string]any{}
	for a, b := range p.Identity {
		id[a] = b
	}
	id[k] = v
	p.Identity = id
	return &p
}

// keeper (re)starts the payments keeper container.
func keeper(ctx context.Context, req *sdk.Request) error {
	cfg, err := decode(req)
	if err != nil {
		return err
	}
	alloc, err := recordAdopted(req)
	if err != nil {
		return err
	}
	if alloc == "" {
		return fmt.Errorf("payments %s: no allocation recorded", cfg.App)
	}
	ttl, err := cfg.allocationTimeout()
	if err != nil {
		return fmt.Errorf("payments %s: %w", cfg.App, err)
	}
	id, err := longlived.Replace(ctx, req, "payments "+cfg.App, "starting the keeper", longlived.Spec{
		App:     cfg.App,
		Args:    []string{KeepArg, "--app", cfg.App, "--allocation", alloc, "--allocation-timeout", ttl.String()},
		Secrets: req.Gcompose.Env, Config: keeperConfig(cfg, alloc),
	}, 30*time.Second)
	if err != nil {
		return err
	}
	req.Printf("payments keeper %s accepts debit notes and invoices of app %s against allocation %s", id[:12], cfg.App, alloc)
	return nil
}

func amend(ctx context.Context, req *sdk.Request) error {
	cfg, err := decode(req)
	if err != nil {
		return err
	}
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	id := allocationID(req)
	if _, err := yc.AmendAllocation(ctx, id, yagna.AllocationUpdate{TotalAmount: cfg.Budget}); err != nil {
		return fmt.Errorf("payments %s: amending allocation %s to %s: %w", cfg.App, id, cfg.Budget, err)
	}
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
	id, err := recordAdopted(req)
	if err != nil {
		return err
	}
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	if id != "" {
		// The services went first (they depend on this resource): accept
		// what is due, and wait (bounded) for the invoices their ended
		// agreements still owe, before the allocation is released.
		settleFinal(ctx, req, yc, cfg.App, id)
	}
	// The keeper goes first, then the allocation: nothing can be accepted
	// against a released allocation anyway.
	if err := longlived.Remove(ctx, d, cfg.App, req.Lineage(), req.Name); err != nil {
		return err
	}
	// The services are gone: the market watcher no longer watches for this
	// app, and stops when it was the last.
	releaseWatcher(ctx, req, yc, cfg.App)
	if id == "" {
		return nil
	}
	if err := yc.ReleaseAllocation(ctx, id); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
		return fmt.Errorf("payments %s: releasing allocation %s: %w", cfg.App, id, err)
	}
	req.Printf("payments keeper removed, allocation %s released", id)
	return nil
}

// settleFinal pays what the app still owes before its allocation goes; what
// it cannot settle is said, not failed: the destroy must not stop at a
// provider that never sends its invoice.
func settleFinal(ctx context.Context, req *sdk.Request, yc *yagna.Client, app, allocation string) {
	a, err := yc.GetAllocation(ctx, allocation)
	if yagna.IsNotFound(err) || yagna.IsGone(err) {
		return
	}
	if err != nil {
		req.Log.Warn("final settlement: reading the allocation", "allocation", allocation, "err", err)
		return
	}
	k := &Keeper{YC: yc, App: app, Allocation: allocation, Log: req.Log}
	start := time.Now()
	unpaid, err := k.SettleFinal(ctx, a.Timestamp, DefaultFinalInvoiceWait)
	switch {
	case err != nil:
		req.Printf("payments %s: final settlement failed: %v", app, err)
	case len(unpaid) > 0:
		req.Printf("payments %s: no acceptable invoice within %s for agreement(s) %s; the allocation is released anyway",
			app, DefaultFinalInvoiceWait, strings.Join(unpaid, ", "))
	default:
		req.Log.Info("final settlement done", "app", app, "took", time.Since(start))
	}
}
