package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// tagged is a market object the adapter made for an app, found by its tags.
type tagged struct {
	Kind string `json:"kind"` // "agreement" or "demand"
	ID   string `json:"id"`
	// State is an agreement's (Proposal, Pending, Approved).
	State yagna.AgreementState `json:"state,omitempty"`
	// Provider of an agreement.
	Provider     string `json:"provider,omitempty"`
	ProviderName string `json:"-"`
	Lineage      string `json:"-"`
	Operation    string `json:"-"`
	Resource     string `json:"-"`
	Created      time.Time
}

func (t tagged) detail() string {
	s := ""
	if t.Kind == "agreement" {
		s = fmt.Sprintf("%s with provider %s (%s), ", t.State, t.ProviderName, t.Provider)
	}
	s += "created " + t.Created.UTC().Format(time.RFC3339)
	if t.Operation != "" {
		s += " by operation " + t.Operation
	}
	return s
}

func tagsOf(props map[string]any) (app, lineage, op, resource string) {
	str := func(k string) string { v, _ := props[k].(string); return v }
	return str(tag.App), str(tag.Lineage), str(tag.Operation), str(tag.Resource)
}

// findTagged lists the live market objects of app: its demands (GET
// /demands, by their properties) and its agreements that can still cost
// money or be approved: Approved and Pending ones by the appSessionId given
// at confirm, Proposal ones (not confirmed yet, so without a session) by
// their demand's properties.
func findTagged(ctx context.Context, yc *yagna.Client, app string) ([]tagged, error) {
	var out []tagged
	demands, err := yc.Demands(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing demands: %w", err)
	}
	for _, d := range demands {
		a, l, op, res := tagsOf(d.Properties)
		if a == app {
			out = append(out, tagged{Kind: "demand", ID: d.DemandID, Lineage: l, Operation: op, Resource: res, Created: d.Timestamp})
		}
	}
	var ids []string
	for _, q := range []struct {
		session string
		state   yagna.AgreementState
	}{{tag.SessionID(app), yagna.AgreementApproved}, {tag.SessionID(app), yagna.AgreementPending}, {"", yagna.AgreementProposalState}} {
		list, err := yc.ListAgreements(ctx, q.session, q.state)
		if err != nil {
			return nil, fmt.Errorf("listing %s agreements: %w", q.state, err)
		}
		for _, e := range list {
			if !slices.Contains(ids, e.ID) {
				ids = append(ids, e.ID)
			}
		}
	}
	for _, id := range ids {
		a, err := yc.GetAgreement(ctx, id)
		if yagna.IsNotFound(err) || yagna.IsGone(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading agreement %s: %w", id, err)
		}
		app2, l, op, res := tagsOf(a.Demand.Properties)
		if app2 != app || (a.State != yagna.AgreementApproved && a.State != yagna.AgreementPending && a.State != yagna.AgreementProposalState) {
			continue
		}
		out = append(out, tagged{Kind: "agreement", ID: id, State: a.State, Provider: a.Offer.ProviderID, ProviderName: a.ProviderName(),
			Lineage: l, Operation: op, Resource: res, Created: a.Timestamp})
	}
	return out, nil
}

// abandon ends an agreement whatever its state: cancelled before approval,
// terminated after; what is already over is fine.
func abandon(ctx context.Context, yc *yagna.Client, id, why string) error {
	return abandonFor(ctx, yc, id, why, "")
}

// abandonFor is abandon for a provider's failure, fault (none when ""): the
// reason carries it as faultKey, so a state call that finds the agreement
// terminated by the requestor knows whom to blame.
func abandonFor(ctx context.Context, yc *yagna.Client, id, why, fault string) error {
	cancel, term := &yagna.Reason{Message: why}, yagna.TerminationReason(why)
	term.Extra["golem.requestor.code"] = requestorCode(why)
	if fault != "" {
		cancel.Extra = map[string]any{faultKey: fault}
		term.Extra[faultKey] = fault
	}
	err := yc.CancelAgreement(ctx, id, cancel)
	if err == nil || yagna.IsNotFound(err) {
		return nil
	}
	err = yc.TerminateAgreement(ctx, id, term)
	if err == nil || yagna.IsNotFound(err) || yagna.IsGone(err) {
		return nil
	}
	return fmt.Errorf("ending agreement %s: %w", id, err)
}

// removeTagged ends one object found by its tags.
func removeTagged(ctx context.Context, yc *yagna.Client, t tagged, why string) error {
	if t.Kind == "demand" {
		if err := yc.UnsubscribeDemand(ctx, t.ID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			return fmt.Errorf("unsubscribing demand %s: %w", t.ID, err)
		}
		return nil
	}
	return abandon(ctx, yc, t.ID, why)
}

// removeStrays ends what an interrupted operation of this resource left.
func removeStrays(ctx context.Context, yc *yagna.Client, strays []tagged) error {
	var errs []error
	for _, t := range strays {
		if err := removeTagged(ctx, yc, t, "gcompose: left by an interrupted operation"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// strays are the live objects tagged with this resource's pending operation
// (and this state's lineage) that its identity does not name: what an
// interrupted create made before it could report it. They are removed, not
// adopted: a rental whose agreement was never reported never got as far as
// its activity and init commands.
func strays(ctx context.Context, yc *yagna.Client, req *sdk.Request, id Identity) ([]tagged, error) {
	p := req.Persisted().Pending
	app := req.App()
	if p == nil || app == "" {
		return nil, nil
	}
	all, err := findTagged(ctx, yc, app)
	if err != nil {
		return nil, err
	}
	var out []tagged
	for _, t := range all {
		if t.Operation == p.ID && t.Lineage == req.Lineage() && t.ID != id.AgreementID {
			out = append(out, t)
		}
	}
	return out, nil
}

// cleanup ends the strays of a resource that runs fine otherwise.
func (s *svc) cleanup(ctx context.Context, req *sdk.Request) error {
	var ss staleState
	if err := req.DecodeStaleState(&ss); err != nil {
		return err
	}
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	if err := removeStrays(ctx, yc, ss.Strays); err != nil {
		return fmt.Errorf("service %s: %w", req.Name, err)
	}
	for _, t := range ss.Strays {
		req.Printf("service %s: ended %s %s left by an interrupted operation", req.Name, t.Kind, t.ID)
	}
	return nil
}

// sweep finds the app's demands and agreements that no state names
// (CONTRACT-10): this lineage's are ended when asked to (their activities
// end with them, and their nodes leave the known VPNs), another lineage's
// are only reported, and those of a known resource's pending operation are
// left to that resource's next state call. With sweep.only, only the listed
// ones are ended (the leftover steps the user approved, one per call); the
// others are reported, as in a plan.
func (s *svc) sweep(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	q := req.SweepRequest()
	app, lineage := req.App(), req.Lineage()
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	if app == "" {
		return res, nil
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	pending := map[string]bool{}
	knownProviders := map[string]bool{}
	var nets []string
	for _, k := range q.Known {
		id := identityOf(k.Identity)
		if id.AgreementID != "" {
			known[id.AgreementID] = true
		}
		if id.ProviderID != "" {
			knownProviders[id.ProviderID] = true
		}
		if id.NetworkID != "" && !slices.Contains(nets, id.NetworkID) {
			nets = append(nets, id.NetworkID)
		}
		if k.Pending != nil {
			pending[k.Pending.ID] = true
		}
	}
	found, err := findTagged(ctx, yc, app)
	if err != nil {
		return nil, err
	}
	for _, t := range found {
		if known[t.ID] || (t.Operation != "" && pending[t.Operation]) || (t.Kind == "demand" && s.book.owns(t.ID)) {
			continue
		}
		o := protocol.Orphan{Kind: t.Kind, ID: t.ID, Lineage: t.Lineage, Resource: t.Resource, Action: protocol.OrphanReported, Detail: t.detail()}
		if q.Terminates(t.ID) && lineage != "" && t.Lineage == lineage {
			if err := removeTagged(ctx, yc, t, "gcompose: no state names it (swept)"); err != nil {
				// An agreement whose provider yagna cannot reach cannot be
				// ended (500/408: core/market/src/rest_api/error.rs); that
				// must not block the deploy or destroy: reported, and the
				// next sweep tries again.
				if t.Kind == "agreement" && providerUnreachable(err) {
					o.Detail += "; not ended, its provider is unreachable: " + err.Error()
					res.Found = append(res.Found, o)
					continue
				}
				return nil, err
			}
			o.Action = protocol.OrphanTerminated
			if t.Kind == "agreement" && !knownProviders[t.Provider] {
				for _, n := range nets {
					if err := yc.RemoveNode(ctx, n, t.Provider); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
						return nil, fmt.Errorf("removing node %s of swept agreement %s from VPN %s: %w", t.Provider, t.ID, n, err)
					}
				}
			}
		}
		res.Found = append(res.Found, o)
	}
	return res, nil
}
