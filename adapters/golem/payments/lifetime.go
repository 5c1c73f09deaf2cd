package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// DefaultAllocationTimeout is how long an allocation outlives its keeper.
// yagna keeps an allocation without a timeout for ten years
// (core/payment/src/models/allocation.rs) and releases one at its timeout
// (core/payment/src/api/allocations/mod.rs schedule_release_allocation): so
// the allocation gets a bounded timeout, which the keeper keeps moving ahead
// while the app runs. An app whose keeper is gone for longer frees its funds
// by itself.
const DefaultAllocationTimeout = 24 * time.Hour

// allocationTimeout is the config's allocation_timeout or the default.
func (c Config) allocationTimeout() (time.Duration, error) {
	if c.AllocationTimeout == "" {
		return DefaultAllocationTimeout, nil
	}
	d, err := time.ParseDuration(c.AllocationTimeout)
	if err != nil || d < 10*time.Second {
		return 0, fmt.Errorf("allocation_timeout %q: want a duration of at least 10s, such as 24h", c.AllocationTimeout)
	}
	return d, nil
}

// tagTimeout is the timeout of a new allocation: ttl from now, its
// nanoseconds tagged with the state's lineage and the operation (package
// tag), so that a later call finds it even if its id was never recorded.
func tagTimeout(req *sdk.Request, ttl time.Duration) time.Time {
	op := ""
	if o := req.Operation(); o != nil {
		op = o.ID
	}
	return tag.Timeout(time.Now().Add(ttl), req.Lineage(), op)
}

// extendEvery is how often the keeper moves the timeout ahead.
func extendEvery(ttl time.Duration) time.Duration {
	return max(time.Second, min(ttl/4, time.Hour))
}

// extend moves the allocation's timeout to ttl from now, keeping its tags;
// it does nothing when the timeout is that far already.
func (k *Keeper) extend(ctx context.Context) error {
	a, err := k.YC.GetAllocation(ctx, k.Allocation)
	if err != nil {
		return fmt.Errorf("allocation %s: %w", k.Allocation, err)
	}
	now := time.Now()
	next := now.Add(k.TTL)
	if a.Timeout != nil {
		if a.Timeout.After(next.Add(-extendEvery(k.TTL))) {
			return nil
		}
		next = tag.Retime(*a.Timeout, next)
	}
	if _, err := k.YC.AmendAllocation(ctx, k.Allocation, yagna.AllocationUpdate{Timeout: &next}); err != nil {
		return fmt.Errorf("moving the timeout of allocation %s to %s: %w", k.Allocation, next.Format(time.RFC3339), err)
	}
	k.Log.Info("allocation timeout moved ahead", "timeout", next)
	return nil
}

// extendLoop keeps the allocation alive while the keeper runs.
func (k *Keeper) extendLoop(ctx context.Context) {
	every := extendEvery(k.TTL)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		if err := k.extend(ctx); err != nil && ctx.Err() == nil {
			k.Log.Warn("extending the allocation", "err", err)
		}
	}
}

// adopt finds the allocation of the resource's pending operation (an
// interrupted create that never recorded its id), nil if none.
func adopt(ctx context.Context, yc *yagna.Client, req *sdk.Request) (*yagna.Allocation, error) {
	p := req.Persisted().Pending
	if p == nil || req.Lineage() == "" {
		return nil, nil
	}
	list, err := yc.Allocations(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing allocations: %w", err)
	}
	for _, a := range list {
		if a.Timeout != nil && tag.OfOperation(*a.Timeout, req.Lineage(), p.ID) {
			return &a, nil
		}
	}
	return nil, nil
}

// sweep releases this lineage's allocations that no state names and removes
// keeper containers of payments resources the state does not have
// (CONTRACT-10). An allocation carries only its tagged timeout: another
// state's allocations cannot be told from anybody else's, so they are not
// reported. With sweep.only, only the listed ones are released or removed.
func sweep(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	q := req.SweepRequest()
	app, lineage := req.App(), req.Lineage()
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	if app == "" {
		return res, nil
	}
	known := map[string]bool{}
	names := map[string]bool{}
	var pending []string
	for _, k := range q.Known {
		names[k.Name] = true
		if id, _ := k.Identity["allocation_id"].(string); id != "" {
			known[id] = true
		}
		if k.Pending != nil {
			pending = append(pending, k.Pending.ID)
		}
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	if lineage != "" {
		list, err := yc.Allocations(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing allocations: %w", err)
		}
	next:
		for _, a := range list {
			if known[a.AllocationID] || a.Timeout == nil || !tag.OfLineage(*a.Timeout, lineage) {
				continue
			}
			for _, op := range pending {
				if tag.OfOperation(*a.Timeout, lineage, op) {
					continue next // the resource's next state call adopts it
				}
			}
			o := protocol.Orphan{Kind: "allocation", ID: a.AllocationID, Lineage: lineage, Action: protocol.OrphanReported,
				Detail: fmt.Sprintf("%s GLM on %s, %s spent, created %s", a.TotalAmount, platformOf(a), a.SpentAmount, a.Timestamp.UTC().Format(time.RFC3339))}
			if q.Terminates(a.AllocationID) {
				if err := yc.ReleaseAllocation(ctx, a.AllocationID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
					return nil, fmt.Errorf("releasing allocation %s: %w", a.AllocationID, err)
				}
				o.Action = protocol.OrphanTerminated
			}
			res.Found = append(res.Found, o)
		}
	}
	d, err := longlived.Docker()
	if err != nil {
		return nil, err
	}
	defer d.Close()
	node, err := longlived.Node(ctx, yc)
	if err != nil {
		return nil, err
	}
	cs, err := longlived.Sweep(ctx, d, app, lineage, req.Type, "keeper", node, names, q.Terminates)
	if err != nil {
		return nil, err
	}
	res.Found = append(res.Found, cs...)
	return res, nil
}

func platformOf(a yagna.Allocation) string {
	if a.PaymentPlatform != nil && a.PaymentPlatform.Name != "" {
		return a.PaymentPlatform.Name
	}
	return "?"
}
