package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// replace is the rebuild of a service that runs (a changed config, a node
// away from its planned address): its replacement is secured before the
// running rental is taken down, so that a replacement that cannot be rented
// leaves the app as it was. In order:
//  1. the negotiation and the agreement (the new provider chosen and
//     approved), the identity still naming the running rental;
//  2. the running rental ended (its activity destroyed, its node out of the
//     VPN, its agreement terminated), the identity then naming the new
//     agreement;
//  3. the new provider joined to the VPN at the planned address (freed in
//     step 2), its activity created, deployed and started, the init run.
//
// The page is down from step 2 to the end of step 3: the new activity's
// deploy and start (docs/golem.md). A failure in 1 fails the action with
// the old rental untouched; one in 3 is a create's failure (the next
// provider is tried, up to maxProviders), the old rental being gone.
//
// One action rather than the engine's delete then create: the engine runs a
// rebuild's actions in the order the state call lists them, and the order
// needed here (agree, end the old, deploy the new) splits the create in
// two around the delete. A rebuild of a rental that no longer runs (a dead
// activity, an ended agreement, an interrupted create) stays delete then
// create: nothing is up to keep, and its provider may be the one freed.
func (s *svc) replace(ctx context.Context, req *sdk.Request) error {
	in, err := s.rentStart(ctx, req)
	if err != nil {
		return fmt.Errorf("%w (no replacement rented, so the running one is kept)", err)
	}
	cfg, ss, yc, old, failed, failedWhy, previous := in.cfg, in.ss, in.yc, in.old, in.failed, in.failedWhy, in.previous
	if cfg.Payload.Runtime == "" {
		return fmt.Errorf("service %s: payload has no runtime", req.Name)
	}
	r := &rental{yc: yc, req: req, cfg: cfg, t: s.t, hold: true, id: Identity{Failed: failed, FailedWhy: failedWhy,
		Applied: Fingerprints(req.Config), InitPending: true, Image: cfg.image, Agreements: historyOf(old, ss.Strays)},
		cl: s.claims.claimer(yc.BaseURL, req.Name), forget: s.forgetter(yc, req.Log)}
	defer r.cl.done()

	// 1. The replacement's agreement, the running rental untouched.
	if err := r.negotiate(ctx); err != nil {
		// What the negotiation learnt of providers (blamed, agreements
		// tried) is kept; the identity still names the running rental.
		if rerr := req.ReportIdentity(learnt(r.id)); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return fmt.Errorf("service %s: no replacement rented, so the running one is kept (provider %s, agreement %s, activity %s): %w",
			req.Name, old.ProviderID, old.AgreementID, old.ActivityID, err)
	}
	req.Printf("service %s: replacement agreed with %s (%s), agreement %s; ending the running rental on provider %s",
		req.Name, firstNonEmpty(r.providerName, r.id.ProviderID), r.id.ProviderID, r.id.AgreementID, old.ProviderID)

	// 2. The running rental ended.
	down := time.Now()
	if err := endRunning(ctx, yc, req, old); err != nil {
		// The old activity still runs: the replacement is given up.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.hold = false
		r.abandonNew(cctx, old)
		cancel()
		return fmt.Errorf("service %s: the running rental could not be ended, so it is kept and its replacement (agreement %s) given up: %w", req.Name, r.id.AgreementID, err)
	}
	r.hold = false
	if err := req.ReportIdentity(switched(r.id)); err != nil {
		return err
	}

	// 3. The replacement brought up at the planned address.
	if err := r.runFrom(ctx, previous, true); err != nil {
		why, fault := whyCreateFail, ""
		var pf providerFault
		switch {
		case ctx.Err() != nil:
			why = whyInterrupted
		case errors.As(err, &pf):
			why, fault = whyProvider, pf.Error()
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.cleanup(cctx, why, fault)
		cancel()
		return fmt.Errorf("service %s: the running rental was ended (agreement %s) and its replacement failed: %w", req.Name, old.AgreementID, err)
	}
	req.Printf("service %s: replaced: running on %s (%s) at %s, agreement %s, activity %s; down for %s at most (from ending the running rental to the end of the new one's init commands)",
		req.Name, r.providerName, r.id.ProviderID, r.id.IP, r.id.AgreementID, r.id.ActivityID, time.Since(down).Round(100*time.Millisecond))
	return nil
}

// learnt is what a failed negotiation reports: the providers avoided and
// the agreements tried, nothing of the rental that still runs.
func learnt(id Identity) map[string]any {
	m := map[string]any{}
	if len(id.Failed) > 0 {
		m["failed_providers"] = id.Failed
		m["failed_reasons"] = id.FailedWhy
	}
	if len(id.Agreements) > 0 {
		m["agreements"] = id.Agreements
	}
	return m
}

// switched is the identity once the running rental is ended: the new
// agreement, and none of the old rental's activity, address and logs
// (reported identity is merged key by key: what is left out stays).
func switched(id Identity) map[string]any {
	m := id.asMap()
	for _, k := range []string{"activity_id", "network_id", "ip"} {
		if _, ok := m[k]; !ok {
			m[k] = ""
		}
	}
	if _, ok := m["logs"]; !ok {
		m["logs"] = []any{}
	}
	return m
}

// abandonNew ends the replacement's agreement when the running rental
// could not be ended, and reports what was learnt; the identity keeps the
// running rental.
func (r *rental) abandonNew(ctx context.Context, old Identity) {
	if r.id.AgreementID != "" {
		if err := abandonFor(ctx, r.yc, r.id.AgreementID, whyCreateFail, ""); err != nil {
			r.req.Log.Warn("ending the replacement's agreement", "agreement", r.id.AgreementID, "err", err)
		}
	}
	_ = r.req.ReportIdentity(learnt(r.id))
}

// endRunning ends the running rental of a replace: its activity destroyed,
// its node out of the VPN (freeing the planned address), its agreement
// terminated. It fails only when the activity may still run; a node or an
// agreement that cannot be ended once the activity is gone is said, not
// failed (the replacement's join evicts a node this resource held; an
// agreement yagna cannot terminate expires).
func endRunning(ctx context.Context, yc *yagna.Client, req *sdk.Request, id Identity) error {
	done := removal{Activity: id.ActivityID, Agreement: id.AgreementID}
	if id.ActivityID != "" {
		err := yc.DestroyActivity(ctx, id.ActivityID)
		switch {
		case err == nil:
			done.ActivityEnd = "destroyed"
		case yagna.IsNotFound(err) || yagna.IsGone(err):
			done.ActivityEnd = "was already gone"
		default:
			return fmt.Errorf("destroying activity %s: %w", id.ActivityID, err)
		}
	}
	var warn []string
	if id.NetworkID != "" && id.ProviderID != "" {
		if err := yc.RemoveNode(ctx, id.NetworkID, id.ProviderID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			warn = append(warn, fmt.Sprintf("node %s not removed from VPN %s (%v)", id.ProviderID, id.NetworkID, err))
		}
	}
	if id.AgreementID != "" {
		done.AgreementEnd = agreementEnding(ctx, yc, id.AgreementID)
		if err := abandon(ctx, yc, id.AgreementID, "gcompose: service "+req.Name+" replaced"); err != nil {
			warn = append(warn, fmt.Sprintf("agreement %s not terminated (%v)", id.AgreementID, err))
		}
	}
	req.Printf("%s", done.message(req.Name))
	if len(warn) > 0 {
		req.Printf("service %s: %s", req.Name, strings.Join(warn, "; "))
	}
	return nil
}
