package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Timeouts of the waits of one create; a call that runs past them fails
// with what it was waiting for.
type Timeouts struct {
	Negotiation time.Duration // offers, counter-proposals, agreement approval
	Approval    time.Duration // one agreement's approval
	Deploy      time.Duration // deploy + start (the image download); payload param deploy_timeout overrides it
	Exec        time.Duration // each init command
}

// DefaultTimeouts fit the devnet and a healthy Golem Network.
func DefaultTimeouts() Timeouts {
	return Timeouts{Negotiation: 3 * time.Minute, Approval: 60 * time.Second, Deploy: DefaultDeployTimeout, Exec: 5 * time.Minute}
}

// Adapter is the golem-service adapter.
func Adapter() sdk.Adapter { return AdapterWith(DefaultTimeouts()) }

// AdapterWith is the adapter with other timeouts (tests shorten them).
func AdapterWith(t Timeouts) sdk.Adapter {
	s := &svc{t: t, reg: &registries{}, book: &book{}, claims: &claims{}}
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			ConfigSchema: json.RawMessage(configSchema),
			// gcompose ps shows who runs the service and its VPN address.
			Gcompose: reportsSpend(withRegistryEnv(withOutputs(estimates(network.InitExt(&protocol.Summary{IP: "/network_node/ip", Provider: "/agreement/provider_name"}))))),
		}),
		Check:   network.Check,
		State:   s.state,
		Actions: map[string]sdk.ActionFunc{"create": s.create, "delete": s.remove, "cleanup": s.cleanup, "replace": s.replace},
		Sweep:   s.sweep,
		// The offer book's subscriptions end with the adapter.
		Stop: func(context.Context) { s.book.close() },
	}
}

type svc struct {
	t   Timeouts
	reg *registries
	// book holds the market's offers for the estimates of the adapter's
	// life (book.go), when no market watcher runs (watch.go).
	book *book
	// claims spread the concurrent creates of this adapter over distinct
	// providers and VPN addresses (claims.go).
	claims *claims
	// identities are the requestor identities of the yagnas asked (GET
	// /me), by URL and app key: what names their market watcher.
	mu         sync.Mutex
	identities map[string]string
}

// watcher is the market watcher of yc's yagna, nil when none answers.
func (s *svc) watcher(ctx context.Context, yc *yagna.Client, log *slog.Logger) *WatchClient {
	k := yc.BaseURL + "|" + keyOf(yc.AppKey)
	s.mu.Lock()
	id := s.identities[k]
	s.mu.Unlock()
	if id == "" {
		me, err := yc.Me(ctx)
		if err != nil || me.Identity == "" {
			log.Debug("no market watcher: yagna did not say who it is", "err", err)
			return nil
		}
		id = me.Identity
		s.mu.Lock()
		if s.identities == nil {
			s.identities = map[string]string{}
		}
		s.identities[k] = id
		s.mu.Unlock()
	}
	c := NewWatchClient(yc.BaseURL, id, yc.AppKey)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.Ping(pctx); err != nil {
		log.Debug("no market watcher: the adapter's own offer book is read", "err", err)
		return nil
	}
	return c
}

// forgetter is what a create calls when yagna says an offer it countered
// is gone (offerGone): the offer leaves the market watcher's book and the
// adapter's own at once, so that the next estimate or create of this run
// or the next does not pick it again (the watcher's refresh would drop it
// only a minute and a window later).
func (s *svc) forgetter(yc *yagna.Client, log *slog.Logger) func(context.Context, Offer) {
	return func(ctx context.Context, o Offer) {
		s.book.drop(o.Provider, o.props)
		wc := s.watcher(ctx, yc, log)
		if wc == nil {
			return
		}
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := wc.drop(dctx, o.Provider, o.props); err != nil {
			log.Warn("the market watcher was not told of an offer gone", "provider", o.Who(), "err", err)
		}
	}
}

// estimates says the state call estimates costs before the config is known
// (the first plan of an app: the allocation and the VPN do not exist yet).
func estimates(ext *protocol.InitExt) *protocol.InitExt {
	ext.Estimate = true
	return ext
}

// Identity is what the service adapter persists as soon as it knows it.
type Identity struct {
	AgreementID string `json:"agreement_id,omitempty"`
	ActivityID  string `json:"activity_id,omitempty"`
	ProviderID  string `json:"provider_id,omitempty"`
	NetworkID   string `json:"network_id,omitempty"`
	IP          string `json:"ip,omitempty"`
	// Price is the agreed price and what it comes to (nil before an
	// agreement): state shows it as agreement.price.
	Price *Agreed `json:"price"`
	// Failed are providers that failed this resource on their side (blame):
	// avoided next time, by the plan's estimate and the create alike.
	Failed []string `json:"failed_providers,omitempty"`
	// FailedWhy says why each of Failed was blamed.
	FailedWhy map[string]string `json:"failed_reasons,omitempty"`
	// Image is the image the rental runs (a VM payload's), as resolved
	// when it was created.
	Image *Image `json:"image,omitempty"`
	// Agreements are every agreement made for this resource, the one it
	// runs on and those of the rentals it replaced or gave up on: what
	// gcompose cost counts. Kept across rebuilds as Failed is, in the state
	// rather than asked of yagna, which forgets an agreement 90 days after
	// it ends (YAGNA_MARKET_AGREEMENT_STORE_DAYS).
	Agreements []string `json:"agreements,omitempty"`
	// Applied fingerprints the config the rental was made for.
	Applied map[string]string `json:"applied,omitempty"`
	// InitPending is true from the first report of a create until its init
	// commands have all run: a rental found alive with it set was
	// interrupted half-way. Never omitted, so that the last report clears it
	// (reported identity is merged key by key).
	InitPending bool `json:"init_pending"`
	// Logs are what the init commands printed. They travel as identity
	// because the verifying state call only sees what the action reported;
	// the VALID state hands them on as state.logs (gcompose logs).
	Logs []LogEntry `json:"logs,omitempty"`
}

// LogEntry is one command's output, in the state.logs convention of
// docs/protocol.md.
type LogEntry struct {
	Source   string `json:"source,omitempty"`
	Command  string `json:"command,omitempty"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Time     string `json:"time,omitempty"`
}

// logLimit bounds each stream kept per command: logs are persisted and sent
// back on every call.
const logLimit = 16 << 10

func tailOf(s string) string {
	if len(s) <= logLimit {
		return s
	}
	return "..." + s[len(s)-logLimit:]
}

func (id Identity) asMap() map[string]any {
	b, _ := json.Marshal(id)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func identityOf(m map[string]any) Identity {
	var id Identity
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &id)
	return id
}

// staleState carries what the state call learnt to the actions.
type staleState struct {
	Failed    []string          `json:"failed_providers,omitempty"`
	FailedWhy map[string]string `json:"failed_reasons,omitempty"`
	// Previous is the address the node held before a rebuild.
	Previous string `json:"previous_ip,omitempty"`
	// Strays are what an interrupted operation of the resource made but
	// never reported (found by its tags): the actions end them first.
	Strays []tagged `json:"strays,omitempty"`
	// Image is the image as this plan resolved it: what the create rents.
	Image *Image `json:"image,omitempty"`
}

// observed is what exists of a resource's rental.
type observed struct {
	activity  yagna.StateName // "" when missing
	actErr    string
	agreement *yagna.Agreement
	// unreachable is yagna's answer when it could not reach the provider
	// for the activity's state ("" when it could).
	unreachable string
	// ended is yagna's AgreementTerminatedEvent of a Terminated agreement
	// (who terminated it, why); endedErr why it could not be read.
	ended    *yagna.AgreementOperationEvent
	endedErr string
}

func (o observed) alive() bool {
	return o.unreachable == "" && o.activity == yagna.StateReady && o.agreement != nil && o.agreement.State == yagna.AgreementApproved
}

func (o observed) anything() bool {
	return (o.activity != "" && o.activity != yagna.StateTerminated) ||
		(o.agreement != nil && o.agreement.State == yagna.AgreementApproved)
}

func (o observed) why(provider string) string {
	switch {
	case o.agreement == nil:
		return "the agreement is gone"
	case o.agreement.State != yagna.AgreementApproved:
		return "the agreement is " + string(o.agreement.State)
	case o.unreachable != "":
		return "provider " + provider + " is unreachable (" + o.unreachable + ")"
	case o.activity == "":
		return "the activity is gone"
	default:
		s := "the activity is " + string(o.activity)
		if o.actErr != "" {
			s += " (" + o.actErr + ")"
		}
		return s
	}
}

// stateTries is how many times the state call asks for an activity's state
// when yagna cannot reach the provider, before it takes the provider as
// gone: one slow answer is not an outage.
const stateTries = 3

// observe reads the agreement, then the activity's state. yagna answers the
// agreement from its own database, so a failure there is yagna's and an
// error; it asks the provider for the state of a live activity and answers
// 408 or 500 when the provider cannot be reached
// (core/activity/src/api.rs get_activity_state_web): that is the provider
// gone, a drift to rebuild, not an error that would block refresh and
// deploy. A call that gets no answer at all is yagna down: an error.
func observe(ctx context.Context, yc *yagna.Client, id Identity) (observed, error) {
	var o observed
	if id.AgreementID != "" {
		a, err := yc.GetAgreement(ctx, id.AgreementID)
		switch {
		case err == nil:
			o.agreement = &a
			if a.State == yagna.AgreementTerminated {
				if o.ended, o.endedErr, err = endedBy(ctx, yc, id.AgreementID); err != nil {
					return o, err
				}
			}
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		default:
			return o, fmt.Errorf("reading agreement %s: %w", id.AgreementID, err)
		}
	}
	if id.ActivityID != "" {
		var st yagna.ActivityState
		var err error
		for try := 1; ; try++ {
			st, err = yc.GetActivityState(ctx, id.ActivityID)
			if !providerUnreachable(err) || try == stateTries || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(yagna.Backoff(0, try)):
			}
		}
		switch {
		case err == nil:
			o.activity = st.Current()
			o.actErr = st.ErrorMessage
			if o.actErr == "" {
				o.actErr = st.Reason
			}
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		case providerUnreachable(err):
			o.unreachable = err.Error()
		default:
			return o, fmt.Errorf("reading activity %s state: %w", id.ActivityID, err)
		}
	}
	return o, nil
}

func (s *svc) state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	if req.Gcompose != nil && req.Gcompose.Estimate {
		// Only the cost is wanted (plan asks apart, so apply's state calls
		// never wait for the market); the config may still hold
		// references known after apply. An image that cannot be resolved
		// is refused here: the deploy then changes nothing (the payments
		// and the VPN it would make first are not made for a create that
		// cannot rent).
		if err := cfg.ResolveImage(ctx, s.reg.client(req), identityOf(req.Persisted().Identity).Image, false); err != nil {
			return refusedCreate("", err)
		}
		cost, refusal, err := estimate(ctx, s.book, s.watcher(ctx, yc, req.Log), yc, req, cfg)
		if err != nil {
			return nil, fmt.Errorf("service %s: %w", req.Name, err)
		}
		res, err := stale(protocol.ChangeCreate, "estimate only", nil, "", nil, "create")
		if err == nil {
			res.Gcompose.Cost = cost
			refuse(res, refusal)
		}
		return res, err
	}
	if req.Replacing() {
		// plan asks what renting anew will leave once what runs is ended
		// (deploy --replace): the address the node is planned at, the rest
		// after apply. Nothing is looked up: the create is told nothing
		// of what runs now either.
		return stale(protocol.ChangeCreate, "replaced: rented anew", nil, plannedIP(cfg), nil, "create")
	}
	p := req.Persisted()
	id := identityOf(p.Identity)
	o, err := observe(ctx, yc, id)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", req.Name, err)
	}
	left, err := strays(ctx, yc, req, id)
	if err != nil {
		return nil, fmt.Errorf("service %s: looking for what an interrupted operation left: %w", req.Name, err)
	}
	if req.Desired() == protocol.Absent {
		if !o.anything() && len(left) == 0 {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		why := "provider " + id.ProviderID + " still runs it"
		if !o.anything() {
			why = strayReason(left)
		}
		res, err := stale(protocol.ChangeDelete, why, nil, "", staleState{Strays: left}, "delete")
		if err == nil {
			// What the rentals cost up to their end: the state's ledger
			// keeps it once the resource is removed.
			res.Gcompose.Spent = spentOf(ctx, yc, id, false)
		}
		return res, err
	}
	if err := cfg.ResolveImage(ctx, s.reg.client(req), id.Image, false); err != nil {
		if id.AgreementID == "" && id.ActivityID == "" {
			return refusedCreate(plannedIP(cfg), err) // nothing runs: the deploy changes nothing
		}
		return nil, fmt.Errorf("service %s: %w", req.Name, err)
	}
	ss := staleState{Failed: id.Failed, FailedWhy: id.FailedWhy, Previous: id.IP, Strays: left, Image: cfg.image}
	planned := plannedIP(cfg)
	if id.AgreementID == "" && id.ActivityID == "" {
		reason := "not rented yet"
		if len(left) > 0 {
			reason += "; " + strayReason(left)
		}
		return stale(protocol.ChangeCreate, reason, nil, planned, ss, "create")
	}
	if !o.alive() {
		// The provider that ran it is avoided from now on only if it failed
		// on its side (blame): the plan's estimate goes by the same rule.
		ss.Failed, ss.FailedWhy = avoided(id, o)
		v := blame(id, o)
		reason := v.why + ": renting again"
		if v.blamed {
			reason += ", avoiding provider " + id.ProviderID + " from now on"
		} else if id.ProviderID != "" {
			reason += " (provider " + id.ProviderID + " not blamed)"
		}
		return stale(protocol.ChangeRebuild, reason, nil, planned, ss, "delete", "create")
	}
	if cfg.NodeIP != "" && id.IP != "" && id.IP != cfg.NodeIP {
		return stale(protocol.ChangeRebuild, "the node is at "+id.IP+", planned at "+cfg.NodeIP+"", []string{"/node_ip"}, planned, ss, "replace")
	}
	if id.InitPending {
		return stale(protocol.ChangeRebuild, "its create was interrupted before the init commands finished: renting again", nil, planned, ss, "delete", "create")
	}
	if forces := rebuildForces(id.Applied, req.Config); len(forces) > 0 {
		return stale(protocol.ChangeRebuild, "changed: "+strings.Join(forces, ", ")+" (a running activity cannot be changed in place)", forces, planned, ss, "replace")
	}
	if img, now := id.Image, cfg.image; img != nil && now != nil && now.Tag != "" && img.Tag == now.Tag && img.Hash != now.Hash {
		return stale(protocol.ChangeRebuild, fmt.Sprintf("image tag %s now resolves to image %s, the rental runs %s", now.Tag, now.Hash, img.Hash),
			[]string{"/payload/params/image_tag"}, planned, ss, "replace")
	}
	if len(left) > 0 {
		res, err := stale(protocol.ChangeUpdate, strayReason(left), nil, planned, ss, "cleanup")
		if err == nil {
			res.Gcompose.Unknown = nil
		}
		return res, err
	}
	res := &protocol.StateResult{Status: protocol.Valid, State: outputs(id, o.agreement), Gcompose: &protocol.StateExt{
		Cost: agreedCost(id.Price), Spent: spentOf(ctx, yc, id, true)}}
	if res.Gcompose.Cost == nil && res.Gcompose.Spent == nil {
		res.Gcompose = nil
	}
	return res, nil
}

// plannedIP is the node's address after a (re)create when it is known now:
// planned on a network, which join takes or fails. "" if not.
func plannedIP(cfg Config) string {
	if cfg.Network == nil {
		return ""
	}
	return cfg.PlannedIP()
}

func strayReason(left []tagged) string {
	if len(left) == 1 {
		return fmt.Sprintf("%s %s left by an interrupted operation", left[0].Kind, left[0].ID)
	}
	return fmt.Sprintf("%d objects left by an interrupted operation", len(left))
}

func outputs(id Identity, a *yagna.Agreement) map[string]any {
	name := ""
	if a != nil {
		name = a.ProviderName()
	}
	out := map[string]any{
		"network_node": map[string]any{"ip": id.IP, "node_id": id.ProviderID},
		"agreement":    map[string]any{"id": id.AgreementID, "provider_id": id.ProviderID, "provider_name": name},
		"activity":     map[string]any{"id": id.ActivityID},
		"state":        "running",
	}
	if id.Price != nil {
		out["agreement"].(map[string]any)["price"] = id.asMap()["price"]
	}
	if len(id.Logs) > 0 {
		out["logs"] = id.asMap()["logs"]
	}
	return out
}

// stale is a STALE answer; plannedIP is the node's address when it is
// known before the create (planned by adapters/golem/lowering), "" if not.
// A create or rebuild plans it (protocol StateExt.Planned): what reads it
// is planned with it, so a rebuild at the same address leaves its readers
// unchanged in the plan, as it does in the deploy.
func stale(change, reason string, forces []string, plannedIP string, ss any, actions ...string) (*protocol.StateResult, error) {
	res := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Reason: reason, Forces: forces}}
	if ss != nil {
		raw, err := sdk.StaleState(ss)
		if err != nil {
			return nil, err
		}
		res.StaleState = raw
	}
	for _, a := range actions {
		res.Actions = append(res.Actions, protocol.ActionSpec{Name: a})
	}
	if change == protocol.ChangeCreate || change == protocol.ChangeRebuild {
		res.Gcompose.Unknown = []string{"/network_node/node_id", "/agreement", "/activity"}
		if plannedIP == "" {
			res.Gcompose.Unknown = append([]string{"/network_node/ip"}, res.Gcompose.Unknown...)
		} else {
			res.Gcompose.Planned = map[string]any{"/network_node/ip": plannedIP}
		}
	}
	return res, nil
}

// remove destroys the activity, takes the node out of the VPN and ends the
// agreement; what is already gone is skipped. A provider that yagna cannot
// reach does not block it: its activity cannot be destroyed nor its
// agreement terminated, and yagna keeps the agreement Approved until the
// provider ends it (a provider agent that cannot reach its requestor does,
// after its debit-note accept timeout) or it expires; that is said, not
// failed, or a rebuild away from a dead provider could never happen.
func (s *svc) remove(ctx context.Context, req *sdk.Request) error {
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	id := identityOf(req.Persisted().Identity)
	var ss staleState
	if err := req.DecodeStaleState(&ss); err != nil {
		return err
	}
	var errs []error
	if err := removeStrays(ctx, yc, ss.Strays); err != nil {
		errs = append(errs, err)
	}
	var unreachable []string
	done := removal{Activity: id.ActivityID, Agreement: id.AgreementID}
	if id.ActivityID != "" {
		err := yc.DestroyActivity(ctx, id.ActivityID)
		switch {
		case err == nil:
			done.ActivityEnd = "destroyed"
		case yagna.IsNotFound(err) || yagna.IsGone(err):
			done.ActivityEnd = "was already gone"
		case providerUnreachable(err):
			unreachable = append(unreachable, fmt.Sprintf("activity %s not destroyed (%v)", id.ActivityID, err))
		default:
			errs = append(errs, fmt.Errorf("destroying activity %s: %w", id.ActivityID, err))
		}
	}
	if id.NetworkID != "" && id.ProviderID != "" {
		if err := yc.RemoveNode(ctx, id.NetworkID, id.ProviderID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			errs = append(errs, fmt.Errorf("removing node %s from VPN %s: %w", id.ProviderID, id.NetworkID, err))
		}
	}
	if id.AgreementID != "" {
		done.AgreementEnd = agreementEnding(ctx, yc, id.AgreementID)
		err := abandon(ctx, yc, id.AgreementID, "gcompose: service "+req.Name+" removed")
		switch {
		case err == nil:
		case providerUnreachable(err):
			unreachable = append(unreachable, fmt.Sprintf("agreement %s not terminated (%v): yagna keeps it until the provider ends it or it expires", id.AgreementID, err))
		default:
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("service %s: %w", req.Name, err)
	}
	// Keep the list of failed providers for the create that may follow:
	// those the state call blamed (staleState) and one yagna cannot reach.
	failed, why := id.Failed, map[string]string{}
	for _, src := range []map[string]string{id.FailedWhy, ss.FailedWhy} {
		for p, w := range src {
			why[p] = w
		}
	}
	for _, p := range ss.Failed {
		failed = withProvider(failed, p)
	}
	if len(unreachable) > 0 && id.ProviderID != "" {
		failed = withProvider(failed, id.ProviderID)
		why[id.ProviderID] = "unreachable when its rental was removed: " + strings.Join(unreachable, "; ")
	}
	cleared := map[string]any{"agreement_id": "", "activity_id": "", "provider_id": "", "ip": "", "price": nil, "failed_providers": failed}
	if len(why) > 0 {
		cleared["failed_reasons"] = why
	}
	// The agreement ended here stays in the history.
	if h := historyOf(id, ss.Strays); len(h) > 0 {
		cleared["agreements"] = h
	}
	if err := req.ReportIdentity(cleared); err != nil {
		return err
	}
	if len(unreachable) > 0 {
		req.Printf("service %s: provider %s is unreachable: %s", req.Name, id.ProviderID, strings.Join(unreachable, "; "))
		return nil
	}
	req.Printf("%s", done.message(req.Name))
	return nil
}
