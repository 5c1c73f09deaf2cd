package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// rentStart is what a create and a replace start from: the config with its
// image resolved (as the plan resolved it, else asked now), the plan's stale
// state, the yagna client, the rental recorded so far, the providers to
// avoid (recorded, and those the state call blamed) and the address a
// rebuild keeps; what an interrupted operation left (found by its tag) is
// removed first.
type rentStart struct {
	cfg       Config
	ss        staleState
	yc        *yagna.Client
	old       Identity
	failed    []string
	failedWhy map[string]string
	previous  string
}

func (s *svc) rentStart(ctx context.Context, req *sdk.Request) (*rentStart, error) {
	in := &rentStart{failedWhy: map[string]string{}}
	if err := req.DecodeConfig(&in.cfg); err != nil {
		return nil, err
	}
	if a := req.App(); a != "" {
		in.cfg.App = a
	}
	if err := req.DecodeStaleState(&in.ss); err != nil {
		return nil, err
	}
	if err := in.cfg.ResolveImage(ctx, s.reg.client(req), in.ss.Image, true); err != nil {
		return nil, fmt.Errorf("service %s: %w", req.Name, err)
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	in.yc = yc
	in.old = identityOf(req.Persisted().Identity)
	in.failed = slices.Clone(in.old.Failed)
	for _, src := range []map[string]string{in.old.FailedWhy, in.ss.FailedWhy} {
		for p, w := range src {
			in.failedWhy[p] = w
		}
	}
	for _, f := range in.ss.Failed {
		in.failed = withProvider(in.failed, f)
	}
	in.previous = firstNonEmpty(in.ss.Previous, in.old.IP)
	if err := removeStrays(ctx, yc, in.ss.Strays); err != nil {
		return nil, fmt.Errorf("service %s: %w", req.Name, err)
	}
	return in, nil
}

// create rents a provider for the instance and brings it up; identifying
// attributes are reported the moment they are known.
func (s *svc) create(ctx context.Context, req *sdk.Request) error {
	in, err := s.rentStart(ctx, req)
	if err != nil {
		return err
	}
	cfg, ss, yc, id, failed, failedWhy := in.cfg, in.ss, in.yc, in.old, in.failed, in.failedWhy
	ss.Previous = in.previous
	r := &rental{yc: yc, req: req, cfg: cfg, t: s.t, id: Identity{Failed: failed, FailedWhy: failedWhy, Applied: Fingerprints(req.Config), InitPending: true, Image: cfg.image,
		Agreements: historyOf(id, ss.Strays)}, wc: s.watcher(ctx, yc, req.Log), cl: s.claims.claimer(yc.BaseURL, req.Name), forget: s.forgetter(yc, req.Log)}
	defer r.cl.done()
	if err := r.run(ctx, ss.Previous); err != nil {
		// Leave nothing half-made behind: what was reported is cleaned up
		// by the next state call's rebuild if this cleanup fails too. The
		// provider is blamed only for its own failure: not for a create cut
		// short (gcompose went away or was interrupted: ctx is done), nor
		// for a failing init command (the payload's).
		why, fault := whyCreateFail, ""
		var pf providerFault
		var pl payloadFault
		switch {
		case ctx.Err() != nil:
			why = whyInterrupted
		case errors.As(err, &pl):
			why = whyPayload
		case errors.As(err, &pf):
			why, fault = whyProvider, pf.Error()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.cleanup(cctx, why, fault)
		cancel()
		return fmt.Errorf("service %s: %w", req.Name, err)
	}
	req.Printf("service %s: running on %s (%s) at %s, agreement %s, activity %s",
		req.Name, r.providerName, r.id.ProviderID, r.id.IP, r.id.AgreementID, r.id.ActivityID)
	return nil
}

// rental is one create in progress.
type rental struct {
	yc  *yagna.Client
	req *sdk.Request
	cfg Config
	t   Timeouts

	id           Identity
	providerName string
	// hold keeps the identity unreported while a replacement is negotiated
	// (replace): the resource still names the rental that runs until it is
	// ended. What the negotiation makes carries the operation's tag
	// (demand), so a kill meanwhile leaves nothing the sweep cannot find.
	hold bool
	// wc is the market watcher, nil when none runs: a create without the
	// plan's view of the market reads its warm book instead (bookHint).
	wc *WatchClient
	// cl is this create's claims on providers and VPN addresses among the
	// adapter's concurrent creates (claims.go); nil claims nothing.
	cl *claimer
	// forget, when set, takes an offer yagna says is gone out of the
	// offer books (svc.forgetter).
	forget func(context.Context, Offer)
}

func (r *rental) report() error {
	if r.hold {
		return nil
	}
	return r.req.ReportIdentity(r.id.asMap())
}

// fail marks the current provider as failed on its side, why (avoided
// from now on: blame).
func (r *rental) fail(why string) {
	if r.id.ProviderID == "" {
		return
	}
	r.id.Failed = withProvider(r.id.Failed, r.id.ProviderID)
	if r.id.FailedWhy == nil {
		r.id.FailedWhy = map[string]string{}
	}
	r.id.FailedWhy[r.id.ProviderID] = why
}

// maxProviders is how many providers one create tries: a provider that
// fails after the agreement (the activity, the image download, the start)
// costs that provider, not the deploy.
const maxProviders = 3

// providerFault is a failure of the rented provider (not of the payload's
// own commands, not of yagna): the next provider may do better.
type providerFault struct{ err error }

func (e providerFault) Error() string { return e.err.Error() }
func (e providerFault) Unwrap() error { return e.err }

// payloadFault is a failure of the payload itself (its image cannot start
// wherever it is deployed): no other provider is tried, none is blamed.
type payloadFault struct{ err error }

func (e payloadFault) Error() string { return e.err.Error() }
func (e payloadFault) Unwrap() error { return e.err }

// faultOf marks err as the provider's unless yagna itself gave no answer
// or answered with its own failure (localError).
func faultOf(err error) error {
	if err == nil || yagna.IsTransport(err) || localError(err) {
		return err
	}
	return providerFault{err}
}

// startFailed is the exe-unit's report that the payload's deploy or start
// failed (a command result of Error), as opposed to a provider that could
// not be reached or took too long.
type startFailed struct{ msg string }

func (e startFailed) Error() string { return e.msg }

// unfail takes provider back off the failed list: its failure was the
// payload's.
func (r *rental) unfail(provider string) error {
	r.id.Failed = slices.DeleteFunc(slices.Clone(r.id.Failed), func(p string) bool { return p == provider })
	delete(r.id.FailedWhy, provider)
	// Reported identity is merged key by key, and the identity omits an
	// empty list: the shorter one is sent as it is.
	failed, why := []string{}, map[string]string{}
	failed = append(failed, r.id.Failed...)
	for p, w := range r.id.FailedWhy {
		why[p] = w
	}
	return r.req.ReportIdentity(map[string]any{"failed_providers": failed, "failed_reasons": why})
}

func (r *rental) run(ctx context.Context, previousIP string) error {
	return r.runFrom(ctx, previousIP, false)
}

// runFrom is run; with negotiated, the first provider's agreement is made
// already (replace) and only brought up.
func (r *rental) runFrom(ctx context.Context, previousIP string, negotiated bool) error {
	if r.cfg.Payload.Runtime == "" {
		return errors.New("payload has no runtime")
	}
	var earlier []string
	// The providers whose deploy or start failed, by how (failureSignature):
	// the same failure on a second provider is the payload's, and neither
	// provider is blamed.
	startedBy := map[string]string{}
	for try := 1; ; try++ {
		var err error
		if try == 1 && negotiated {
			err = r.bringUp(ctx, previousIP)
		} else {
			err = r.rentOne(ctx, previousIP)
		}
		if err == nil {
			break
		}
		var pf providerFault
		var sf startFailed
		if errors.As(err, &pf) && errors.As(err, &sf) && ctx.Err() == nil {
			sig := failureSignature(sf.msg)
			if first, ok := startedBy[sig]; ok && first != r.id.ProviderID {
				if err := r.unfail(first); err != nil {
					return err
				}
				return payloadFault{fmt.Errorf("payload %s cannot start: its deploy and start failed the same way on provider %s and provider %s (%s); no provider is blamed",
					firstNonEmpty(r.cfg.Payload.Name, r.req.Name), first, r.id.ProviderID, sf.msg)}
			}
			startedBy[sig] = r.id.ProviderID
		}
		if !errors.As(err, &pf) || try == maxProviders || ctx.Err() != nil {
			if len(earlier) > 0 {
				err = fmt.Errorf("%w (providers tried before: %s)", err, strings.Join(earlier, "; "))
			}
			return err
		}
		earlier = append(earlier, err.Error())
		r.req.Printf("service %s: %v; trying another provider (%d of %d)", r.req.Name, err, try+1, maxProviders)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.cleanup(cctx, whyProvider, pf.Error())
		cancel()
	}
	for i, c := range r.cfg.Init {
		if err := r.runInit(ctx, i, c); err != nil {
			return err
		}
	}
	r.id.InitPending = false
	return r.report()
}

// rentOne negotiates with one provider and brings the image up on it.
func (r *rental) rentOne(ctx context.Context, previousIP string) error {
	if err := r.negotiate(ctx); err != nil {
		return err
	}
	return r.bringUp(ctx, previousIP)
}

// bringUp brings the image up on the provider agreed with: the VPN, the
// activity, deploy and start.
func (r *rental) bringUp(ctx context.Context, previousIP string) error {
	if r.cfg.Network != nil && r.cfg.Network.ID != "" {
		if err := r.join(ctx, previousIP); err != nil {
			return err
		}
	}
	act, err := r.yc.CreateActivity(ctx, r.id.AgreementID)
	if err != nil {
		return faultOf(fmt.Errorf("provider %s: creating an activity on agreement %s: %w", r.id.ProviderID, r.id.AgreementID, err))
	}
	r.id.ActivityID = act.ActivityID
	if err := r.report(); err != nil {
		return err
	}
	if err := r.deployAndStart(ctx); err != nil {
		return faultOf(fmt.Errorf("provider %s: %w", r.id.ProviderID, err))
	}
	return nil
}

// demand is the Demand for the payload, decorated for the allocation. The
// payment terms are not in it: each counter-proposal copies them from the
// offer it answers (Terms).
func (r *rental) demand(ctx context.Context, subnet string) (yagna.DemandOfferBase, string, error) {
	exp, err := r.cfg.Expiration()
	if err != nil {
		return yagna.DemandOfferBase{}, "", err
	}
	props := map[string]any{
		"golem.srv.comp.expiration":        time.Now().Add(exp).UnixMilli(),
		"golem.node.debug.subnet":          subnet,
		"golem.srv.comp.vm.package_format": "gvmkit-squash",
		"golem.srv.caps.multi-activity":    true,
	}
	// Tags: the keeper accepts only its app's notes (gcompose.app), and a
	// later call finds what this operation made (package tag).
	if r.cfg.App != "" {
		props[tag.App] = r.cfg.App
		props[tag.Resource] = r.req.Name
		if l := r.req.Lineage(); l != "" {
			props[tag.Lineage] = l
		}
		if op := r.req.Operation(); op != nil {
			props[tag.Operation] = op.ID
		}
		// A member of a VPN: the plan of a later deploy compares it with
		// the member's fingerprint then (jointOf).
		if f := r.cfg.Fingerprint(); f != "" {
			props[tag.Config] = f
		}
	}
	switch r.cfg.Payload.Runtime {
	case "vm":
		tp, err := r.cfg.TaskPackage()
		if err != nil {
			return yagna.DemandOfferBase{}, "", err
		}
		props["golem.srv.comp.task_package"] = tp
	case ManifestRuntime:
		for _, k := range []string{"manifest", "manifest_sig", "manifest_sig_algorithm", "manifest_cert"} {
			if v := r.cfg.param(k); v != "" {
				props["golem.srv.comp.payload"+strings.TrimPrefix(strings.ReplaceAll(k, "_", "."), "manifest")] = v
			}
		}
		if _, ok := props["golem.srv.comp.payload"]; !ok {
			return yagna.DemandOfferBase{}, "", errors.New("runtime vm/manifest needs params.manifest (base64); manifest_path is not read by this adapter")
		}
	}
	var extra []string
	platform := ""
	if r.cfg.AllocationID != "" {
		dec, err := r.yc.DemandDecorations(ctx, r.cfg.AllocationID)
		if err != nil {
			return yagna.DemandOfferBase{}, "", fmt.Errorf("payment decorations of allocation %s: %w", r.cfg.AllocationID, err)
		}
		for _, p := range dec.Properties {
			props[p.Key] = p.Value
			if rest, ok := strings.CutPrefix(p.Key, "golem.com.payment.platform."); ok && strings.HasSuffix(rest, ".address") && platform == "" {
				platform = strings.TrimSuffix(rest, ".address")
			}
		}
		extra = append(extra, dec.Constraints...)
	}
	cons, err := r.cfg.ConstraintsIn(subnet, extra...)
	if err != nil {
		return yagna.DemandOfferBase{}, "", err
	}
	return yagna.DemandOfferBase{Properties: props, Constraints: cons}, platform, nil
}

// negotiate rents the best offer: the subnets in order of preference, in
// each the offers of a short window judged by Market, then the cheapest
// within the caps countered, the next one when its draft or agreement
// fails. Providers that failed this service before are avoided.
func (r *rental) negotiate(ctx context.Context) error {
	m, err := r.cfg.Market()
	if err != nil {
		return err
	}
	exp, err := r.cfg.Expiration()
	if err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, r.t.Negotiation)
	defer cancel()
	pl := plannedOf(r.req, time.Now())
	if pl.hint == nil {
		if h := r.bookHint(ctx, m, exp); h != nil {
			r.req.Log.Debug("no market hint from the plan: the market watcher's warm book stands for it", "why", pl.why, "offers", len(h.Offers))
			pl.hint, pl.why = h, ""
		}
	}
	if pl.hint == nil {
		r.req.Log.Debug("no market hint from the plan: gathering offers for the whole window", "why", pl.why)
		if pl.cost != nil && pl.cost.Basis == protocol.CostMarket {
			r.req.Printf("service %s: %s: gathering offers for the whole %s window", r.req.Name, pl.why, m.Window)
		}
	}
	subnets := r.cfg.Subnets()
	for i, subnet := range subnets {
		err := r.negotiateIn(nctx, subnet, m, exp, pl, i < len(subnets)-1)
		var none noneWithinCaps
		if err == nil || !errors.As(err, &none) || i == len(subnets)-1 {
			return err
		}
		r.req.Printf("service %s: %v; asking subnet %s next", r.req.Name, err, subnets[i+1])
	}
	return nil
}

// goneSubscription is how yagna names a subscription that is no more in a
// counter-proposal's answer: core/market/src/negotiation/common.rs
// counter_proposal → validate_proposal → store.get_offer (and get_demand),
// whose QueryOfferError becomes ProposalValidationError
// (core/market/src/negotiation/error.rs From<QueryOfferError>): NotFound
// "Subscription [id] wasn't found." and Unsubscribed "Subscription [id]
// was already unsubscribed." answer 400, SubscriptionExpired "Subscription
// [id] expired." 410 (core/market/src/rest_api/error.rs ResponseError for
// ProposalValidationError).
var goneSubscription = regexp.MustCompile(`Subscription \[([^\]]+)\] (?:wasn't found|was already unsubscribed|expired)\.`)

// offerGone says a counter-proposal on demand sub failed because the
// offer countered is gone (withdrawn or expired): a 400 or 410 naming a
// subscription that is not ours (validate_proposal checks the demand too,
// with the same message for our own).
func offerGone(err error, sub string) bool {
	if st := yagna.StatusOf(err); st != http.StatusBadRequest && st != http.StatusGone {
		return false
	}
	m := goneSubscription.FindStringSubmatch(err.Error())
	return m != nil && m[1] != sub
}

// noneWithinCaps: offers came, and none can be taken.
type noneWithinCaps struct{ err error }

func (e noneWithinCaps) Error() string { return e.err.Error() }
func (e noneWithinCaps) Unwrap() error { return e.err }

// draftWait bounds how long a countered provider may take to answer with
// its draft before the next offer is tried.
const draftWait = 30 * time.Second

// maxCounters is how many counter-proposals are out at once; preferWait is
// how long a draft waits for the answers of better-ranked providers
// countered at the same time (the market strategy's choice) before it is
// taken: a provider that does not answer costs that, not the negotiation.
const (
	maxCounters = 3
	preferWait  = 5 * time.Second
)

// countered is an offer countered: in flight (being sent) or out (yagna
// took it), with the provider's good draft once it answers.
type countered struct {
	o      Offer
	seq    int // the order of the counters, best ranked first
	since  time.Time
	draft  *yagna.Proposal
	judged Offer
}

// counterPoll is the shortest long poll for offer events while a
// counter-proposal call is out.
const counterPoll = 20 * time.Millisecond

// oldestSent is when the oldest counter-proposal call in flight was sent.
func oldestSent(inflight map[int]*countered) time.Time {
	oldest := time.Now()
	for _, c := range inflight {
		if c.since.Before(oldest) {
			oldest = c.since
		}
	}
	return oldest
}

// sentCounter is yagna's answer to a counter-proposal call.
type sentCounter struct {
	c   *countered
	cid string
	err error
}

// bestDraft is the best-ranked counter with a good draft in, once every
// better-ranked counter (out or in flight) has had preferWait to answer;
// nil when there is none yet.
func bestDraft(pendings map[string]*countered, inflight map[int]*countered) (string, *countered) {
	bestID, best := "", (*countered)(nil)
	for cid, c := range pendings {
		if c.draft != nil && (best == nil || c.seq < best.seq) {
			bestID, best = cid, c
		}
	}
	if best == nil {
		return "", nil
	}
	waiting := func(c *countered) bool { return c.seq < best.seq && c.draft == nil && time.Since(c.since) < preferWait }
	for _, c := range pendings {
		if waiting(c) {
			return "", nil
		}
	}
	for _, c := range inflight {
		if waiting(c) {
			return "", nil
		}
	}
	return bestID, best
}

// negotiateIn negotiates in one subnet. With fallback (another subnet is
// asked next), a subnet without a single offer in the window is given up.
// With the plan's view of the subnet (pl), the best offer held is countered
// as soon as no provider the plan saw that may still offer was cheaper;
// the window only bounds the wait for those.
func (r *rental) negotiateIn(nctx context.Context, subnet string, m Market, exp time.Duration, pl planned, fallback bool) error {
	d, platform, err := r.demand(nctx, subnet)
	if err != nil {
		return err
	}
	sub, err := r.yc.SubscribeDemand(nctx, d)
	if err != nil {
		return fmt.Errorf("subscribing the demand: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(nctx), 10*time.Second)
		defer cancel()
		_ = r.yc.UnsubscribeDemand(uctx, sub)
	}()
	began := time.Now()
	windowEnd := began.Add(m.Window)
	hint := pl.in(subnet)
	var (
		offers []Offer                       // every Initial offer seen, judged
		seen   = map[string]Offer{}          // provider -> its latest offer judged
		terms  = map[string]map[string]any{} // proposal id -> payment terms to promise
		tried  = map[string]bool{}           // providers countered already
		why    = map[string]string{}         // provider -> why it did not agree, for the error
		// The counter-proposals out: answered by yagna (by our counter's
		// id), or still being sent (by their rank order): yagna holds a
		// counter-proposal to a provider it cannot reach for up to 60 s
		// (core/market/src/rest_api/requestor.rs counter_proposal), so
		// a few are sent at once and the first good draft is taken.
		pendings = map[string]*countered{}
		inflight = map[int]*countered{}
		sent     = make(chan sentCounter, maxCounters)
		seq      int
		drafts   = map[string]*yagna.Proposal{} // our counter's id -> the provider's draft answering it
		rejects  = map[string]string{}          // our counter's id -> why the provider rejected it
		chosen   bool                           // the choice was explained
	)
	noAgreement := func() error {
		if _, priced := Cheapest(offers); priced && len(Rank(offers)) == 0 {
			return noneWithinCaps{NoOfferError(offers, m, exp)}
		}
		deadline, _ := nctx.Deadline()
		return fmt.Errorf("no provider agreed within %s (%d offers seen in subnet %s; avoided: %v)%s", r.t.Negotiation-time.Until(deadline), len(offers), subnet, r.id.Failed, reasons(why))
	}
	// The providers this negotiation counters, claimed as such among the
	// adapter's concurrent creates (claims.go) until given up.
	countering := map[string]bool{}
	uncounter := func(provider string) {
		if countering[provider] {
			delete(countering, provider)
			r.cl.uncounter(provider)
		}
	}
	defer func() {
		for p := range countering {
			r.cl.uncounter(p)
		}
	}()
	giveUp := func(cid string, reason string) {
		why[pendings[cid].o.Provider] = reason
		uncounter(pendings[cid].o.Provider)
		delete(pendings, cid)
	}
	// out: providers that will not be rented here whatever they offer:
	// countered already, failed this service, or taken by another create of
	// this adapter (no waiting for its offer: it is busy with that one).
	out := func(provider string) bool {
		return tried[provider] || slices.Contains(r.id.Failed, provider) || r.cl.takenBy(provider) != ""
	}
	takeNow := func(windowOver bool, best Offer) bool {
		return windowOver || (hint != nil && hint.enough(best, seen, out, m, exp))
	}
	// again: a draft was given up on this round (its agreement failed, or
	// another create took its provider) while others may be in already:
	// the next round only looks for news, it does not wait for them.
	again := false
	for {
		wait := 3 * time.Second
		if until := time.Until(windowEnd); until > 0 {
			wait = max(min(wait, until), time.Second)
		}
		if again {
			wait, again = counterPoll, false
		}
		if len(inflight) > 0 {
			// yagna's answer to a counter-proposal call comes on its own
			// (sent), often after the provider's draft came as an event:
			// a long poll would then hold the draft for its whole wait.
			// The poll is short while the counters are young (a provider
			// answers at once), longer as they age (one yagna cannot
			// reach holds the call for up to 60 s).
			wait = min(wait, max(counterPoll, min(time.Second, time.Since(oldestSent(inflight))/2)))
		}
		evs, err := r.yc.CollectOffers(nctx, sub, wait, 20)
		if err != nil && !yagna.IsTimeout(err) {
			if nctx.Err() != nil {
				return noAgreement()
			}
			return fmt.Errorf("collecting offers: %w", err)
		}
		var inVPN map[string]string // read once per batch, when needed
		for _, ev := range evs {
			if ev.EventType == yagna.EventProposalRejected {
				msg := "rejected the counter-proposal"
				if ev.Reason != nil {
					msg += ": " + ev.Reason.Message
				}
				rejects[ev.ProposalID] = msg
				continue
			}
			if ev.EventType != yagna.EventProposal || ev.Proposal == nil {
				continue
			}
			p := ev.Proposal
			if slices.Contains(r.id.Failed, p.IssuerID) {
				// What the plan's estimate left out too (avoided): said
				// when the agreed offer is dearer than planned.
				why[p.IssuerID] = "avoided: " + firstNonEmpty(r.id.FailedWhy[p.IssuerID], "failed this service before")
				_ = r.yc.RejectProposal(nctx, sub, p.ProposalID, &yagna.Reason{Message: "provider failed this service before"})
				continue
			}
			switch p.State {
			case yagna.ProposalInitial:
				o := m.Judge(p, exp)
				if o.Skip == "" {
					if inVPN == nil {
						inVPN = r.vpnNodes(nctx)
					}
					if addr, ok := inVPN[p.IssuerID]; ok {
						o.Skip = "already a node of the VPN at " + addr + " for another service"
					}
				}
				if o.Skip == "" {
					t, err := Terms(p.Properties, exp)
					if err != nil {
						o.Skip = err.Error()
					}
					terms[p.ProposalID] = t
				}
				r.req.Log.Debug("offer judged", "provider", o.Who(), "subnet", o.Subnet, "price", o.Price.String(), "cost", o.Cost, "skip", o.Skip, "over", o.Over)
				offers = append(offers, o)
				seen[o.Provider] = o
				if !o.Usable() {
					reason := o.Skip
					if reason == "" {
						reason = o.Over
					}
					why[o.Provider] = reason
					_ = r.yc.RejectProposal(nctx, sub, p.ProposalID, &yagna.Reason{Message: "gcompose: " + reason})
				}
			case yagna.ProposalDraft:
				// Matched with its counter below: the answer may come in
				// before yagna's answer to the counter-proposal call.
				drafts[p.PrevProposalID] = p
			}
		}
		for drained := false; !drained; {
			select {
			case sc := <-sent:
				delete(inflight, sc.c.seq)
				if sc.err != nil {
					uncounter(sc.c.o.Provider)
					why[sc.c.o.Provider] = "counter-proposal failed: " + sc.err.Error()
					r.req.Log.Debug("counter-proposal failed", "provider", sc.c.o.Provider, "err", sc.err)
					if offerGone(sc.err, sub) && r.forget != nil {
						r.req.Log.Info("the provider's offer is gone: it leaves the offer book", "provider", sc.c.o.Who(), "err", sc.err)
						r.forget(nctx, sc.c.o)
					}
					continue
				}
				sc.c.since = time.Now()
				pendings[sc.cid] = sc.c
			default:
				drained = true
			}
		}
		for cid, c := range pendings {
			if msg, ok := rejects[cid]; ok {
				r.req.Log.Info("provider rejected the counter-proposal", "provider", c.o.Provider, "reason", msg)
				giveUp(cid, msg)
				continue
			}
			if p := drafts[cid]; p != nil && c.draft == nil {
				// The draft is what would be signed: judged again, as a
				// provider may answer with other prices than it offered.
				o := m.Judge(p, exp)
				if !o.Usable() {
					reason := "its draft is not the offer: " + o.Skip + o.Over
					_ = r.yc.RejectProposal(nctx, sub, p.ProposalID, &yagna.Reason{Message: "gcompose: " + reason})
					giveUp(cid, reason)
					continue
				}
				c.draft, c.judged = p, o
			}
			if c.draft == nil && time.Since(c.since) > draftWait {
				giveUp(cid, fmt.Sprintf("no draft within %s", draftWait))
				continue
			}
			// A provider another create of this adapter signs with or
			// runs on is left to it: the next best is taken here.
			if other := r.cl.takenBy(c.o.Provider); other != "" {
				giveUp(cid, "taken by service "+other+", created at the same time")
				again = true
			}
		}
		// The best draft in is signed once every better-ranked counter
		// out has had preferWait to answer.
		if cid, best := bestDraft(pendings, inflight); best != nil {
			p, o := best.draft, best.judged
			if ok, other := r.cl.take(p.IssuerID); !ok {
				giveUp(cid, "taken by service "+other+", created at the same time")
				again = true
			} else if err := r.agree(nctx, p); err != nil {
				r.cl.untake(p.IssuerID)
				giveUp(cid, err.Error())
				again = true
				var rj rejection
				switch {
				case errors.As(err, &rj):
					// A rejection is the provider's choice, not a
					// fault (busy with another requestor's agreement):
					// another provider now, and this one may be
					// rented again later.
					r.req.Log.Info("provider rejected the agreement; trying another provider", "provider", p.IssuerID, "err", err)
				case !errors.Is(context.Cause(nctx), context.Canceled) && !localError(err) && !yagna.IsTransport(err):
					// Not approved in time is the provider's failure; a
					// create cut short meanwhile is not, nor yagna
					// failing on its own side.
					r.req.Log.Info("agreement failed; trying another provider", "provider", p.IssuerID, "err", err)
					r.fail(err.Error())
				default:
					r.req.Log.Info("agreement failed; trying another provider", "provider", p.IssuerID, "err", err)
				}
				r.id.AgreementID, r.id.ProviderID = "", ""
				_ = r.report()
			} else {
				r.id.Price = agreedOf(o.Price, m, exp)
				dearer := ""
				if d := pl.dearer(o, m, exp, seen, why); d != "" {
					dearer = "; " + d
					r.req.Log.Info("agreed dearer than planned", "provider", o.Who(), "detail", d)
				}
				r.req.Printf("service %s: agreed with %s at %s: %s/hour, %s for %s%s", r.req.Name, o.Who(), o.Price,
					glm(r.id.Price.GLMPerHour), glm(r.id.Price.Total), exp, dearer)
				return r.report()
			}
		}
		windowOver := !time.Now().Before(windowEnd)
		outstanding := len(pendings) + len(inflight)
		if outstanding < maxCounters && (windowOver || hint != nil) {
			// The best first, those other creates of this adapter
			// negotiate with after the rest, those they took left out.
			ranked := slices.DeleteFunc(r.cl.spread(Rank(offers)), func(o Offer) bool { return tried[o.Provider] || r.cl.takenBy(o.Provider) != "" })
			early := !windowOver && len(ranked) > 0 && takeNow(false, ranked[0])
			if !chosen && len(offers) > 0 && (windowOver || early) {
				chosen = true
				r.explain(subnet, offers, ranked, m, exp, early, time.Since(began), hint)
			}
			for len(ranked) > 0 && len(pendings)+len(inflight) < maxCounters && takeNow(windowOver, ranked[0]) {
				o := ranked[0]
				ranked = ranked[1:]
				tried[o.Provider] = true
				cp := d
				cp.Properties = maps(d.Properties, "golem.com.payment.chosen-platform", platform)
				for k, v := range terms[o.ProposalID] {
					cp.Properties[k] = v
				}
				if platform == "" {
					delete(cp.Properties, "golem.com.payment.chosen-platform")
				}
				c := &countered{o: o, seq: seq, since: time.Now()}
				seq++
				inflight[c.seq] = c
				countering[o.Provider] = true
				r.cl.counter(o.Provider)
				go func() {
					cid, err := r.yc.CounterProposal(nctx, sub, c.o.ProposalID, cp)
					sent <- sentCounter{c: c, cid: cid, err: err}
				}()
			}
			// Before the window ends, an offer not countered yet waits for
			// what the plan saw cheaper; giving up is for its end.
			if windowOver && fallback && len(offers) == 0 {
				return noneWithinCaps{fmt.Errorf("no offer in subnet %s within %s", subnet, m.Window)}
			}
			if windowOver && len(pendings)+len(inflight) == 0 && len(offers) > 0 {
				if _, priced := Cheapest(offers); priced && len(Rank(offers)) == 0 {
					return noneWithinCaps{NoOfferError(offers, m, exp)}
				}
				if !slices.ContainsFunc(offers, func(o Offer) bool { return o.Skip == "" }) {
					return noneWithinCaps{NoOfferError(offers, m, exp)}
				}
			}
		}
		if nctx.Err() != nil {
			return noAgreement()
		}
	}
}

// explain says which offers were considered and why the first choice won;
// early: chosen before the window ended, after took, by the plan's hint.
func (r *rental) explain(subnet string, offers, ranked []Offer, m Market, exp time.Duration, early bool, took time.Duration, hint *marketHint) {
	head := "no offer within the caps yet"
	if len(ranked) > 0 {
		head = fmt.Sprintf("choosing %s, the cheapest within the caps for %s of use (%s CPU thread(s) busy)", ranked[0].Who(), exp, strconv.FormatFloat(m.CPULoad, 'g', -1, 64))
	}
	over := "over " + m.Window.String()
	if early {
		over = fmt.Sprintf("after %s, none of them beaten by the offers the plan saw %s ago (not waiting out the %s window)",
			took.Round(time.Millisecond), time.Since(hint.At).Round(time.Second), m.Window)
	}
	r.req.Printf("service %s: %d offer(s) in subnet %s %s; %s:%s", r.req.Name, len(offers), subnet, over, head, Explain(offers, m, exp))
}

// reasons lists why providers did not agree, sorted by provider.
func reasons(why map[string]string) string {
	if len(why) == 0 {
		return ""
	}
	provs := make([]string, 0, len(why))
	for p := range why {
		provs = append(provs, p)
	}
	slices.Sort(provs)
	var b strings.Builder
	for _, p := range provs {
		fmt.Fprintf(&b, "; %s: %s", p, why[p])
	}
	return b.String()
}

func maps(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func (r *rental) agree(ctx context.Context, p *yagna.Proposal) (err error) {
	// validTo bounds how long the agreement may wait for approval: one
	// abandoned by a killed run expires by itself soon.
	aid, err := r.yc.CreateAgreement(ctx, p.ProposalID, time.Now().Add(r.t.Approval+time.Minute))
	if err != nil {
		return fmt.Errorf("creating the agreement: %w", err)
	}
	r.id.AgreementID, r.id.ProviderID = aid, p.IssuerID
	r.id.Agreements = withAgreements(r.id.Agreements, aid)
	if err := r.report(); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			// Never leave an agreement that may yet be approved behind:
			// cancelled while Pending (terminate refuses it, and it would
			// hold the provider until it expires), terminated if approved
			// meanwhile.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if aerr := abandon(actx, r.yc, aid, whyUnapproved); aerr != nil {
				r.req.Log.Warn("ending an agreement that was not approved", "agreement", aid, "err", aerr)
			}
		}
	}()
	// The appSessionId lets a later call list the app's agreements
	// (tag.SessionID).
	if err := r.yc.ConfirmAgreement(ctx, aid, tag.SessionID(r.cfg.App)); err != nil {
		return fmt.Errorf("confirming agreement %s: %w", aid, err)
	}
	deadline := time.Now().Add(r.t.Approval)
	for {
		wait := max(min(5*time.Second, time.Until(deadline)), 0)
		err := r.yc.WaitForApproval(ctx, aid, wait)
		if err == nil {
			break
		}
		if rejectedBy(ctx, r.yc, aid, err) {
			return rejection{fmt.Errorf("provider %s rejected agreement %s: %w", p.IssuerID, aid, err)}
		}
		if !yagna.IsTimeout(err) || !time.Now().Before(deadline) {
			return fmt.Errorf("agreement %s not approved within %s: %w", aid, r.t.Approval, err)
		}
	}
	a, err := r.yc.GetAgreement(ctx, aid)
	if err != nil {
		return fmt.Errorf("reading agreement %s: %w", aid, err)
	}
	r.providerName = a.ProviderName()
	return nil
}

// join adds the provider to the VPN at its planned address (or, for a
// config without one, the first free address) and checks that it got it.
//
// yagna answers 200, not 409, when the address is taken, and keeps the node
// that holds it (core/vpn/src/network.rs Handler<AddNode>: Err(IpAddrTaken)
// is ignored): only the node map tells. A holder that is this resource's
// own earlier node (a delete that did not get to remove it) is removed; any
// other holder fails the create, naming it.
func (r *rental) join(ctx context.Context, previousIP string) error {
	netID := r.cfg.Network.ID
	planned := r.cfg.PlannedIP()
	n, err := r.yc.GetNetwork(ctx, netID)
	if err != nil {
		return fmt.Errorf("reading VPN %s: %w", netID, err)
	}
	rg, err := network.ParseRange(n.IP, n.Mask, "")
	if err != nil {
		return fmt.Errorf("VPN %s: %w", netID, err)
	}
	evicted := false
	for attempt := 0; ; attempt++ {
		ip := planned
		if ip == "" {
			used, err := r.usedIPs(ctx, netID, n)
			if err != nil {
				return err
			}
			// Not one another create of this adapter picked and has not
			// added yet (claims.go): concurrent joins pick distinct
			// addresses instead of colliding in the node map.
			ip, err = r.cl.pickIP(netID, func(others []string) (string, error) {
				return network.PickIP(rg, "", append(used, others...), []string{previousIP})
			})
			if err != nil {
				return fmt.Errorf("VPN %s: %w", netID, err)
			}
		} else if a, err := netip.ParseAddr(planned); err != nil || !rg.Prefix.Contains(a) {
			return fmt.Errorf("planned address %q is not in VPN %s (%s)", planned, netID, rg.Prefix)
		}
		if addr, ok := r.vpnNodes(ctx)[r.id.ProviderID]; ok && addr != ip {
			return providerFault{fmt.Errorf("provider %s already holds %s in VPN %s for another service (removing either node would cut off both)", r.id.ProviderID, addr, netID)}
		}
		if err := r.yc.AddNode(ctx, netID, yagna.Node{ID: r.id.ProviderID, IP: ip}); err != nil {
			return fmt.Errorf("adding provider %s to VPN %s at %s: %w", r.id.ProviderID, netID, ip, err)
		}
		holder, err := r.holderOf(ctx, netID, ip)
		if err != nil {
			return err
		}
		if holder == r.id.ProviderID {
			r.id.NetworkID, r.id.IP = netID, ip
			return r.report()
		}
		switch {
		case planned != "" && !evicted && r.ownedBefore(holder):
			evicted = true
			r.req.Printf("service %s: %s of VPN %s is still held by node %s, which this service used before: removing it", r.req.Name, ip, netID, holder)
			if err := r.yc.RemoveNode(ctx, netID, holder); err != nil && !yagna.IsNotFound(err) {
				return fmt.Errorf("removing the earlier node %s from VPN %s: %w", holder, netID, err)
			}
		case planned == "" && attempt < 5:
			// taken between the read and the add (by a node this
			// adapter does not know of): pick again
			r.cl.unreserve(netID, ip)
		default:
			who := "node " + holder
			if holder == "" {
				who = "nobody (yagna kept no node there)"
			}
			return fmt.Errorf("address %s of VPN %s is held by %s, not by provider %s: another service or a node left behind holds it (yagna answers 200 to an add at a taken address)", ip, netID, who, r.id.ProviderID)
		}
	}
}

// vpnNodes maps the providers that are nodes of the service's VPN to an
// address they hold (empty map without a VPN or when it cannot be read: the
// join checks again). A provider that already holds an address there for
// another service is not rented again for this one: yagna removes a node
// with all its addresses (utils/networking/src/vpn/network.rs remove_node),
// so deleting either service would cut the other off.
func (r *rental) vpnNodes(ctx context.Context) map[string]string {
	out := map[string]string{}
	if r.cfg.Network == nil || r.cfg.Network.ID == "" {
		return out
	}
	nodes, err := r.yc.Nodes(ctx, r.cfg.Network.ID)
	if err != nil {
		return out
	}
	for _, n := range nodes {
		if ip := yagna.BareIP(n.IP); ip != r.cfg.PlannedIP() || r.cfg.PlannedIP() == "" {
			out[n.ID] = ip
		}
	}
	return out
}

// holderOf is the node id that holds ip in the VPN ("" for none).
func (r *rental) holderOf(ctx context.Context, netID, ip string) (string, error) {
	nodes, err := r.yc.Nodes(ctx, netID)
	if err != nil {
		return "", fmt.Errorf("nodes of VPN %s: %w", netID, err)
	}
	for _, nd := range nodes {
		if yagna.BareIP(nd.IP) == ip {
			return nd.ID, nil
		}
	}
	return "", nil
}

// ownedBefore tells whether a node is one this resource rented before.
func (r *rental) ownedBefore(node string) bool {
	if node == "" {
		return false
	}
	if slices.Contains(r.id.Failed, node) {
		return true
	}
	prev, _ := r.req.Persisted().Identity["provider_id"].(string)
	return prev == node
}

// usedIPs are the VPN's taken addresses, bare: the gateway, the requestor's
// (yagna lists them with the prefix, "192.168.0.1/24", and gives the
// requestor the first host at creation: core/vpn/src/network.rs
// Handler<GetAddresses>, create_stack_network) and the nodes'.
func (r *rental) usedIPs(ctx context.Context, netID string, n yagna.Network) ([]string, error) {
	used := []string{}
	if n.Gateway != "" {
		used = append(used, yagna.BareIP(n.Gateway))
	}
	addrs, err := r.yc.Addresses(ctx, netID)
	if err != nil {
		return nil, fmt.Errorf("requestor addresses in VPN %s: %w", netID, err)
	}
	for _, a := range addrs {
		used = append(used, yagna.BareIP(a.IP))
	}
	nodes, err := r.yc.Nodes(ctx, netID)
	if err != nil {
		return nil, fmt.Errorf("nodes of VPN %s: %w", netID, err)
	}
	for _, nd := range nodes {
		used = append(used, yagna.BareIP(nd.IP))
	}
	return used, nil
}

// deployAndStart runs the deploy (joined to the VPN) and start commands.
func (r *rental) deployAndStart(ctx context.Context) error {
	deploy := &yagna.DeployCommand{}
	if r.id.NetworkID != "" {
		n, err := r.yc.GetNetwork(ctx, r.id.NetworkID)
		if err != nil {
			return fmt.Errorf("reading VPN %s: %w", r.id.NetworkID, err)
		}
		nodes := map[string]string{}
		me, err := r.yc.Me(ctx)
		if err != nil {
			return fmt.Errorf("requestor identity: %w", err)
		}
		addrs, err := r.yc.Addresses(ctx, n.ID)
		if err != nil {
			return fmt.Errorf("requestor addresses in VPN %s: %w", n.ID, err)
		}
		// The exe-unit takes only bare addresses as nodes keys, nodeIp and
		// gateway (exe-unit/src/state.rs Deployment::extend_networks:
		// map_nodes → to_ip, IpAddr::from_str), and yagna lists the
		// requestor's with the prefix: they are stripped, as golem-js does
		// (src/network/network.ts). The range goes as golem-js sends it: the
		// network address and the mask.
		for _, a := range addrs {
			nodes[yagna.BareIP(a.IP)] = me.Identity
		}
		members, err := r.yc.Nodes(ctx, n.ID)
		if err != nil {
			return fmt.Errorf("nodes of VPN %s: %w", n.ID, err)
		}
		for _, m := range members {
			nodes[yagna.BareIP(m.IP)] = m.ID
		}
		rg, err := yagna.ParseNetworkIP(n.IP, n.Mask)
		if err != nil {
			return fmt.Errorf("VPN %s: %w", n.ID, err)
		}
		deploy.Net = []yagna.DeployNetwork{{ID: n.ID, IP: rg.Addr().String(), Mask: network.DottedMask(rg.Bits()), Gateway: yagna.BareIP(n.Gateway), NodeIP: yagna.BareIP(r.id.IP), Nodes: nodes}}
	}
	limit, err := r.cfg.DeployTimeout(r.t.Deploy)
	if err != nil {
		return err
	}
	// A payload that asks for the capability start-entrypoint has the image's entrypoint started: the
	// start command's argument that ya-runtime-vm reads (runtime/src/lib.rs start).
	start := &yagna.StartCommand{Args: []string{}}
	if slices.Contains(r.cfg.Capabilities(), "start-entrypoint") {
		start.Args = append(start.Args, "start-entrypoint")
	}
	res, err := r.exec(ctx, limit, yagna.ExeScriptCommand{Deploy: deploy}, yagna.ExeScriptCommand{Start: start})
	if err != nil {
		return fmt.Errorf("deploy and start on activity %s: %w", r.id.ActivityID, err)
	}
	if bad, ok := yagna.FirstError(res); ok {
		return fmt.Errorf("deploy and start on activity %s: %w", r.id.ActivityID, startFailed{fmt.Sprintf("command %d: %s", bad.Index, firstNonEmpty(bad.Message, bad.Stderr))})
	}
	return nil
}

// runInit runs one init command and shows its output; a failure fails the
// resource with the command's stderr.
func (r *rental) runInit(ctx context.Context, i int, c InitCmd) error {
	if c.Run == nil || len(c.Run.Args) == 0 {
		return fmt.Errorf("init[%d]: only run commands with args are supported", i)
	}
	entry, args := c.Run.Args[0], c.Run.Args[1:]
	if c.Run.EntryPoint != "" {
		entry, args = c.Run.EntryPoint, c.Run.Args
	}
	res, err := r.exec(ctx, r.t.Exec, yagna.ExeScriptCommand{Run: &yagna.RunCommand{EntryPoint: entry, Args: args, Capture: yagna.CaptureAtEndString()}})
	if err != nil {
		return fmt.Errorf("init[%d] %q: %w", i, strings.Join(c.Run.Args, " "), err)
	}
	for _, x := range res {
		entry := LogEntry{Source: fmt.Sprintf("init[%d]", i), Command: strings.Join(c.Run.Args, " "),
			Stdout: tailOf(x.Stdout), Stderr: tailOf(x.Stderr), Time: time.Now().UTC().Format(time.RFC3339)}
		if x.Result != yagna.ResultError {
			// yagna reports Ok or Error, not the code itself: only success is known.
			code := 0
			entry.ExitCode = &code
		}
		r.id.Logs = append(r.id.Logs, entry)
		if out := strings.TrimSpace(x.Stdout); out != "" {
			r.req.Printf("init[%d] stdout: %s", i, out)
		}
		if x.Result == yagna.ResultError {
			return fmt.Errorf("init[%d] %q failed: %s", i, strings.Join(c.Run.Args, " "), firstNonEmpty(strings.TrimSpace(x.Stderr), x.Message))
		}
		if errOut := strings.TrimSpace(x.Stderr); errOut != "" {
			r.req.Printf("init[%d] stderr: %s", i, errOut)
		}
	}
	return nil
}

func (r *rental) exec(ctx context.Context, limit time.Duration, cmds ...yagna.ExeScriptCommand) ([]yagna.ExeScriptCommandResult, error) {
	batch, err := r.yc.ExecCommands(ctx, r.id.ActivityID, cmds...)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	res, err := r.yc.WaitBatch(ectx, r.id.ActivityID, batch, 5*time.Second)
	if err != nil {
		if ectx.Err() != nil && ctx.Err() == nil {
			return res, fmt.Errorf("batch %s not finished within %s", batch, limit)
		}
		return res, fmt.Errorf("waiting for batch %s: %w", batch, err)
	}
	return res, nil
}

// cleanup undoes a failed create or a failed provider: the activity, the
// VPN node, the agreement (cancelled if it was never approved), ended with
// why. With fault (the provider's failure) the provider is remembered as
// failed, and the agreement's reason says so (faultKey) for a state call
// that finds it before this report lands; without, it is not blamed (a
// create cut short, an init command that failed). The config fingerprints
// stay.
func (r *rental) cleanup(ctx context.Context, why, fault string) {
	if r.id.ActivityID != "" {
		_ = r.yc.DestroyActivity(ctx, r.id.ActivityID)
	}
	if r.id.NetworkID != "" && r.id.ProviderID != "" {
		_ = r.yc.RemoveNode(ctx, r.id.NetworkID, r.id.ProviderID)
	}
	r.cl.untake(r.id.ProviderID)
	if r.id.AgreementID != "" {
		if err := abandonFor(ctx, r.yc, r.id.AgreementID, why, fault); err != nil {
			r.req.Log.Warn("ending the agreement of a failed create", "agreement", r.id.AgreementID, "err", err)
		}
	}
	if fault != "" {
		r.fail(fault)
	}
	r.id = Identity{Failed: r.id.Failed, FailedWhy: r.id.FailedWhy, Applied: r.id.Applied, InitPending: r.id.InitPending, Agreements: r.id.Agreements}
	_ = r.report()
}

// historyOf is the agreements made for a resource so far: its identity's
// history, the agreement it names (a state written before there was a
// history lists only that one) and those of its strays, which an
// interrupted create rented and never reported.
func historyOf(id Identity, strays []tagged) []string {
	h := withAgreements(id.Agreements, id.AgreementID)
	for _, st := range strays {
		if st.Kind == "agreement" {
			h = withAgreements(h, st.ID)
		}
	}
	return h
}

// withAgreements is history with id added at its end, unless it is empty
// or listed already; history itself is not changed.
func withAgreements(history []string, id string) []string {
	if id == "" || slices.Contains(history, id) {
		return history
	}
	return append(slices.Clip(history), id)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
