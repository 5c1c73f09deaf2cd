package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// create rents a provider for the instance and brings it up; identifying
// attributes are reported the moment they are known.
func (s *svc) create(ctx context.Context, req *sdk.Request) error {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return err
	}
	if a := req.App(); a != "" {
		cfg.App = a
	}
	var ss staleState
	if err := req.DecodeStaleState(&ss); err != nil {
		return err
	}
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	id := identityOf(req.Persisted().Identity)
	for _, f := range id.Failed {
		if !slices.Contains(ss.Failed, f) {
			ss.Failed = append(ss.Failed, f)
		}
	}
	if ss.Previous == "" {
		ss.Previous = id.IP
	}
	r := &rental{yc: yc, req: req, cfg: cfg, t: s.t, id: Identity{Failed: ss.Failed, Applied: Fingerprints(req.Config)}}
	if err := r.run(ctx, ss.Previous); err != nil {
		// Leave nothing half-made behind: what was reported is cleaned up
		// by the next state call's rebuild if this cleanup fails too.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		r.cleanup(cctx)
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
}

func (r *rental) report() error { return r.req.ReportIdentity(r.id.asMap()) }

// fail marks the current provider as failed (avoided on the retry).
func (r *rental) fail() {
	if r.id.ProviderID != "" && !slices.Contains(r.id.Failed, r.id.ProviderID) {
		r.id.Failed = append(r.id.Failed, r.id.ProviderID)
	}
}

func (r *rental) run(ctx context.Context, previousIP string) error {
	if r.cfg.Payload.Runtime == "" {
		return errors.New("payload has no runtime")
	}
	if err := r.negotiate(ctx); err != nil {
		return err
	}
	if r.cfg.Network != nil && r.cfg.Network.ID != "" {
		if err := r.join(ctx, previousIP); err != nil {
			r.fail()
			_ = r.report()
			return err
		}
	}
	act, err := r.yc.CreateActivity(ctx, r.id.AgreementID)
	if err != nil {
		r.fail()
		_ = r.report()
		return fmt.Errorf("creating an activity on agreement %s: %w", r.id.AgreementID, err)
	}
	r.id.ActivityID = act.ActivityID
	if err := r.report(); err != nil {
		return err
	}
	if err := r.deployAndStart(ctx); err != nil {
		r.fail()
		_ = r.report()
		return err
	}
	for i, c := range r.cfg.Init {
		if err := r.runInit(ctx, i, c); err != nil {
			return err
		}
	}
	return r.report()
}

// demand is the Demand for the payload, decorated for the allocation.
func (r *rental) demand(ctx context.Context) (yagna.DemandOfferBase, string, error) {
	exp, err := r.cfg.Expiration()
	if err != nil {
		return yagna.DemandOfferBase{}, "", err
	}
	props := map[string]any{
		"golem.srv.comp.expiration":                     time.Now().Add(exp).UnixMilli(),
		"golem.node.debug.subnet":                       r.cfg.Subnet(),
		"golem.srv.comp.vm.package_format":              "gvmkit-squash",
		"golem.srv.caps.multi-activity":                 true,
		"golem.com.payment.debit-notes.accept-timeout?": 240,
	}
	if r.cfg.App != "" {
		props[payments.AppProperty] = r.cfg.App
	}
	switch r.cfg.Payload.Runtime {
	case "vm":
		tp, err := r.cfg.TaskPackage()
		if err != nil {
			return yagna.DemandOfferBase{}, "", err
		}
		props["golem.srv.comp.task_package"] = tp
	case "vm/manifest":
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
	cons, err := r.cfg.Constraints(extra...)
	if err != nil {
		return yagna.DemandOfferBase{}, "", err
	}
	return yagna.DemandOfferBase{Properties: props, Constraints: cons}, platform, nil
}

// negotiate subscribes a demand, answers offers with counter-proposals, and
// makes an agreement with the first provider whose draft comes back and
// who approves it. Failed providers are skipped.
func (r *rental) negotiate(ctx context.Context) error {
	d, platform, err := r.demand(ctx)
	if err != nil {
		return err
	}
	sub, err := r.yc.SubscribeDemand(ctx, d)
	if err != nil {
		return fmt.Errorf("subscribing the demand: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = r.yc.UnsubscribeDemand(uctx, sub)
	}()
	counter := d
	if platform != "" {
		counter.Properties = maps(d.Properties, "golem.com.payment.chosen-platform", platform)
	}
	nctx, cancel := context.WithTimeout(ctx, r.t.Negotiation)
	defer cancel()
	countered := map[string]string{} // our counter-proposal id -> provider
	seen := 0
	for {
		evs, err := r.yc.CollectOffers(nctx, sub, 3*time.Second, 20)
		if err != nil && !yagna.IsTimeout(err) {
			if nctx.Err() != nil {
				return fmt.Errorf("no provider agreed within %s (%d offers seen; avoided: %v)", r.t.Negotiation, seen, r.id.Failed)
			}
			return fmt.Errorf("collecting offers: %w", err)
		}
		for _, ev := range evs {
			if ev.EventType != yagna.EventProposal || ev.Proposal == nil {
				continue
			}
			p := ev.Proposal
			if slices.Contains(r.id.Failed, p.IssuerID) {
				_ = r.yc.RejectProposal(nctx, sub, p.ProposalID, &yagna.Reason{Message: "provider failed this service before"})
				continue
			}
			switch p.State {
			case yagna.ProposalInitial:
				seen++
				cid, err := r.yc.CounterProposal(nctx, sub, p.ProposalID, counter)
				if err != nil {
					r.req.Log.Debug("counter-proposal failed", "provider", p.IssuerID, "err", err)
					continue
				}
				countered[cid] = p.IssuerID
			case yagna.ProposalDraft:
				if _, ok := countered[p.PrevProposalID]; !ok {
					continue
				}
				if err := r.agree(nctx, p); err != nil {
					r.req.Log.Info("agreement failed; trying another provider", "provider", p.IssuerID, "err", err)
					r.fail()
					r.id.AgreementID, r.id.ProviderID = "", ""
					continue
				}
				return nil
			}
		}
		if nctx.Err() != nil {
			return fmt.Errorf("no provider agreed within %s (%d offers seen; avoided: %v)", r.t.Negotiation, seen, r.id.Failed)
		}
	}
}

func maps(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for a, b := range m {
		out[a] = b
	}
	out[k] = v
	return out
}

func (r *rental) agree(ctx context.Context, p *yagna.Proposal) error {
	aid, err := r.yc.CreateAgreement(ctx, p.ProposalID, time.Now().Add(24*time.Hour))
	if err != nil {
		return fmt.Errorf("creating the agreement: %w", err)
	}
	r.id.AgreementID, r.id.ProviderID = aid, p.IssuerID
	if err := r.report(); err != nil {
		return err
	}
	if err := r.yc.ConfirmAgreement(ctx, aid, ""); err != nil {
		return fmt.Errorf("confirming agreement %s: %w", aid, err)
	}
	deadline := time.Now().Add(r.t.Approval)
	for {
		err := r.yc.WaitForApproval(ctx, aid, 5*time.Second)
		if err == nil {
			break
		}
		if !yagna.IsTimeout(err) || time.Now().After(deadline) {
			return fmt.Errorf("agreement %s not approved: %w", aid, err)
		}
	}
	a, err := r.yc.GetAgreement(ctx, aid)
	if err != nil {
		return fmt.Errorf("reading agreement %s: %w", aid, err)
	}
	r.providerName = a.ProviderName()
	return nil
}

// join adds the provider to the VPN at the planned address or the next free
// one, retrying with the next free one if another node took it meanwhile.
func (r *rental) join(ctx context.Context, previousIP string) error {
	netID := r.cfg.Network.ID
	n, err := r.yc.GetNetwork(ctx, netID)
	if err != nil {
		return fmt.Errorf("reading VPN %s: %w", netID, err)
	}
	rg, err := network.ParseRange(n.IP, n.Mask, "")
	if err != nil {
		return fmt.Errorf("VPN %s: %w", netID, err)
	}
	for attempt := 0; ; attempt++ {
		used, err := r.usedIPs(ctx, netID, n)
		if err != nil {
			return err
		}
		ip, err := network.PickIP(rg, r.cfg.PlannedIP(), used, []string{previousIP})
		if err != nil {
			return fmt.Errorf("VPN %s: %w", netID, err)
		}
		err = r.yc.AddNode(ctx, netID, yagna.Node{ID: r.id.ProviderID, IP: ip})
		if err == nil {
			r.id.NetworkID, r.id.IP = netID, ip
			return r.report()
		}
		if !yagna.IsConflict(err) || r.cfg.PlannedIP() != "" || attempt >= 5 {
			return fmt.Errorf("adding provider %s to VPN %s at %s: %w", r.id.ProviderID, netID, ip, err)
		}
	}
}

func (r *rental) usedIPs(ctx context.Context, netID string, n yagna.Network) ([]string, error) {
	used := []string{}
	if n.Gateway != "" {
		used = append(used, n.Gateway)
	}
	addrs, err := r.yc.Addresses(ctx, netID)
	if err != nil {
		return nil, fmt.Errorf("requestor addresses in VPN %s: %w", netID, err)
	}
	for _, a := range addrs {
		used = append(used, a.IP)
	}
	nodes, err := r.yc.Nodes(ctx, netID)
	if err != nil {
		return nil, fmt.Errorf("nodes of VPN %s: %w", netID, err)
	}
	for _, nd := range nodes {
		used = append(used, nd.IP)
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
		for _, a := range addrs {
			nodes[a.IP] = me.Identity
		}
		members, err := r.yc.Nodes(ctx, n.ID)
		if err != nil {
			return fmt.Errorf("nodes of VPN %s: %w", n.ID, err)
		}
		for _, m := range members {
			nodes[m.IP] = m.ID
		}
		deploy.Net = []yagna.DeployNetwork{{ID: n.ID, IP: n.IP, Mask: n.Mask, Gateway: n.Gateway, NodeIP: r.id.IP, Nodes: nodes}}
	}
	res, err := r.exec(ctx, yagna.ExeScriptCommand{Deploy: deploy}, yagna.ExeScriptCommand{Start: &yagna.StartCommand{Args: []string{}}})
	if err != nil {
		return fmt.Errorf("deploy and start on activity %s: %w", r.id.ActivityID, err)
	}
	if bad, ok := yagna.FirstError(res); ok {
		return fmt.Errorf("deploy and start on activity %s: command %d: %s", r.id.ActivityID, bad.Index, firstNonEmpty(bad.Message, bad.Stderr))
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
	res, err := r.exec(ctx, yagna.ExeScriptCommand{Run: &yagna.RunCommand{EntryPoint: entry, Args: args, Capture: yagna.CaptureAtEndString()}})
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

func (r *rental) exec(ctx context.Context, cmds ...yagna.ExeScriptCommand) ([]yagna.ExeScriptCommandResult, error) {
	batch, err := r.yc.ExecCommands(ctx, r.id.ActivityID, cmds...)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, r.t.Exec)
	defer cancel()
	res, err := r.yc.WaitBatch(ectx, r.id.ActivityID, batch, 5*time.Second)
	if err != nil {
		if ectx.Err() != nil && ctx.Err() == nil {
			return res, fmt.Errorf("batch %s not finished within %s", batch, r.t.Exec)
		}
		return res, fmt.Errorf("waiting for batch %s: %w", batch, err)
	}
	return res, nil
}

// cleanup undoes a failed create: the activity, the VPN node, the agreement.
func (r *rental) cleanup(ctx context.Context) {
	if r.id.ActivityID != "" {
		_ = r.yc.DestroyActivity(ctx, r.id.ActivityID)
	}
	if r.id.NetworkID != "" && r.id.ProviderID != "" {
		_ = r.yc.RemoveNode(ctx, r.id.NetworkID, r.id.ProviderID)
	}
	if r.id.AgreementID != "" {
		_ = r.yc.TerminateAgreement(ctx, r.id.AgreementID, yagna.TerminationReason("gcompose: create failed"))
	}
	r.fail()
	failed := r.id.Failed
	r.id = Identity{Failed: failed}
	_ = r.report()
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
