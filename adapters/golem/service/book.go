package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
	"github.com/gcompose/gcompose/adapters/golem/tag"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// The offer book: what the market offers, gathered once for every estimate
// of the adapter's life. The plan estimates each service by the offers of
// its payload's demand over the offer window; asking anew per payload made a
// plan wait one window per payload when gcompose plans them one after the
// other (a service that reads another's output is planned after it), and
// more offers do not come by asking again: yagna sends a subscription the
// offers that match it as they arrive (core/market/src/matcher), as golem-js
// keeps one subscription collecting while it runs.
//
// So the book subscribes one broad demand per page (yagna, app, subnet,
// runtime, capabilities, expiration: what an offer's own constraints may
// test of a demand), keeps collecting on it, and each estimate picks from
// the page the offers its own demand would match, with the constraint
// language yagna's matcher evaluates (adapters/golem/constraint Matches: the
// payload's constraints on the offer, the offer's on the payload's demand).
// The first estimate of a page waits the window; the next ones wait what is
// left of it, nothing once it has passed.

// bookIdle is how long a page is kept without a reader before its demand is
// unsubscribed: long enough for a deploy's plan and apply, short enough
// that an adapter left serving does not hold a subscription for nothing.
const bookIdle = 2 * time.Minute

// book is the served adapter's offer pages by key.
type book struct {
	mu    sync.Mutex
	pages map[string]*page
	wg    sync.WaitGroup
	// idle overrides bookIdle (tests).
	idle time.Duration
	// refresh overrides bookRefresh (tests, the watcher's --refresh).
	refresh time.Duration
	// closed: close was called; no page opens any more.
	closed bool
}

// bookRefresh is how often a page subscribes its demand anew. yagna tells a
// requestor nothing when a provider withdraws its offer: the requestor
// events are ProposalEvent, ProposalRejectedEvent and PropertyQueryEvent
// (ya-client model/src/market/event.rs RequestorEvent), and an unsubscribed
// offer only stops being matched (core/market/src/matcher/store.rs
// unsubscribe_offer); a counter to one of its proposals fails then, with 400
// "Subscription [..] was already unsubscribed" (core/market/src/negotiation
// common.rs validate_proposal). A new demand is matched against the live
// offers only, so the page subscribes a fresh demand every bookRefresh,
// collects on it for the window, and then takes its offers in place of the
// old ones: an offer withdrawn is dropped within bookRefresh + the window.
// A new price comes sooner: the provider's new offer reaches the live
// subscription as a new proposal.
const bookRefresh = time.Minute

// page is one broad demand's subscription and the offers it collected.
type page struct {
	key   string
	began time.Time
	stop  context.CancelFunc
	done  chan struct{}

	mu      sync.Mutex
	sub     string                     // the demand's subscription id
	offers  map[string]*yagna.Proposal // by provider: its latest offer
	err     error                      // why collecting stopped, nil while it runs
	lastUse time.Time
	// since is when the subscription that collected offers began.
	since time.Time
	// next is the fresh subscription of a refresh (bookRefresh) while it
	// collects nextOffers for the window, "" between refreshes.
	next       string
	nextSince  time.Time
	nextOffers map[string]*yagna.Proposal
	// window is how long a fresh subscription collects before its offers
	// replace the page's: the window of the read that opened the page.
	window time.Duration
	// waiting counts the reads waiting out the window: the page is not
	// idle while one waits, however long its window.
	waiting int
}

// bookDemand is a page's broad demand and the key of the page it belongs to.
type bookDemand struct {
	key    string
	demand yagna.DemandOfferBase
	// sharedKey is the key of the page in the market watcher (watch.go),
	// shared by every app: without the app's tags.
	sharedKey string
}

// shared is the page demand as the market watcher keeps it: the app's tags
// left out (no app's sweep ends it; the watcher does when it stops), marked
// with WatchProperty.
func (bd bookDemand) shared() bookDemand {
	props := make(map[string]any, len(bd.demand.Properties))
	for k, v := range bd.demand.Properties {
		switch k {
		case tag.App, tag.Lineage:
			continue
		}
		props[k] = v
	}
	props[WatchProperty] = true
	return bookDemand{key: bd.sharedKey, sharedKey: bd.sharedKey, demand: yagna.DemandOfferBase{Properties: props, Constraints: bd.demand.Constraints}}
}

// propExpiration is the demand's expiration (ms since the epoch): a page's
// demand is subscribed anew with it as far ahead as it first was.
const propExpiration = "golem.srv.comp.expiration"

// renewed is d with its expiration moved as far ahead of now as it was of
// made.
func renewed(d yagna.DemandOfferBase, made time.Time) yagna.DemandOfferBase {
	ms, ok := d.Properties[propExpiration].(int64)
	if !ok {
		if f, isF := d.Properties[propExpiration].(float64); isF {
			ms, ok = int64(f), true
		}
	}
	if !ok {
		return d
	}
	ahead := time.UnixMilli(ms).Sub(made)
	props := make(map[string]any, len(d.Properties))
	for k, v := range d.Properties {
		props[k] = v
	}
	props[propExpiration] = time.Now().Add(ahead).UnixMilli()
	return yagna.DemandOfferBase{Properties: props, Constraints: d.Constraints}
}

// broadDemand is the page demand for d, the payload's own demand in subnet:
// its properties less what names one resource or operation, its
// constraints only the runtime, the subnet and the capabilities. The
// payload's own constraints are applied by pick.
func broadDemand(url string, cfg Config, subnet string, d yagna.DemandOfferBase) (bookDemand, error) {
	props := make(map[string]any, len(d.Properties))
	for k, v := range d.Properties {
		switch k {
		case tag.Resource, tag.Operation, tag.Config:
			continue
		}
		props[k] = v
	}
	caps := slices.Clone(cfg.Capabilities())
	slices.Sort(caps)
	cons, err := constraint.FromGAP16([]string{"golem.runtime.name=" + cfg.Runtime(), "golem.node.debug.subnet=" + subnet}, caps)
	if err != nil {
		return bookDemand{}, fmt.Errorf("payload %s: %w", cfg.Payload.Name, err)
	}
	exp, err := cfg.Expiration()
	if err != nil {
		return bookDemand{}, err
	}
	// What an offer's constraints may test of the demand and differs per
	// payload: the task package (a VM image), a manifest. Pages are shared
	// only by payloads that agree on them, or differ only in the image.
	var payload []string
	for k, v := range props {
		if strings.HasPrefix(k, "golem.srv.comp.payload") {
			payload = append(payload, fmt.Sprintf("%s=%v", k, v))
		}
	}
	slices.Sort(payload)
	rest := []string{subnet, cfg.Runtime(), strings.Join(caps, ","), exp.String(), strings.Join(payload, ",")}
	key := strings.Join(append([]string{url, fmt.Sprint(props[tag.App]), fmt.Sprint(props[tag.Lineage])}, rest...), "|")
	return bookDemand{key: key, sharedKey: strings.Join(rest, "|"), demand: yagna.DemandOfferBase{Properties: props, Constraints: cons}}, nil
}

// read returns the offers of bd's page that the payload's demand d
// matches, once window has passed since the page began; it opens the page
// (subscribes) when there is none. waited is how long it waited.
func (b *book) read(ctx context.Context, yc *yagna.Client, log *slog.Logger, bd bookDemand, d yagna.DemandOfferBase, window time.Duration, progress func(string)) (offers []*yagna.Proposal, waited time.Duration, err error) {
	p, err := b.page(ctx, yc, log, bd, window)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	p.mu.Lock()
	p.waiting++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.waiting--
		p.lastUse = time.Now()
		p.mu.Unlock()
	}()
	if wait := time.Until(p.began.Add(window)); wait > 0 {
		if progress != nil {
			progress(fmt.Sprintf("gathering offers for the %s offer window (%s left; one window for every estimate of this plan)", window, wait.Round(100*time.Millisecond)))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, time.Since(start), ctx.Err()
		case <-t.C:
		case <-p.done:
			t.Stop()
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil && len(p.offers) == 0 {
		return nil, time.Since(start), p.err
	}
	for _, o := range p.offers {
		ok, err := constraint.Matches(d.Properties, d.Constraints, o.Properties, o.Constraints)
		if err != nil {
			log.Debug("offer book: an offer's constraints do not parse, left out", "provider", o.IssuerID, "err", err)
			continue
		}
		if ok {
			offers = append(offers, o)
		}
	}
	slices.SortFunc(offers, func(a, b *yagna.Proposal) int { return strings.Compare(a.IssuerID, b.IssuerID) })
	return offers, time.Since(start), nil
}

// page returns bd's page, subscribing its demand when there is none (or
// the last one stopped).
func (b *book) page(ctx context.Context, yc *yagna.Client, log *slog.Logger, bd bookDemand, window time.Duration) (*page, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("the offer book is closed")
	}
	if p, ok := b.pages[bd.key]; ok {
		select {
		case <-p.done:
		default:
			return p, nil
		}
	}
	sub, err := yc.SubscribeDemand(ctx, bd.demand)
	if err != nil {
		return nil, fmt.Errorf("subscribing the offer book's demand: %w", err)
	}
	// The page outlives the request that opened it: it is stopped by
	// idleness or by close, not by that request's end.
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	now := time.Now()
	p := &page{key: bd.key, began: now, since: now, stop: stop, done: make(chan struct{}), sub: sub, offers: map[string]*yagna.Proposal{}, lastUse: now, window: window}
	if b.pages == nil {
		b.pages = map[string]*page{}
	}
	b.pages[bd.key] = p
	idle, refresh := b.idle, b.refresh
	if idle <= 0 {
		idle = bookIdle
	}
	if refresh <= 0 {
		refresh = bookRefresh
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		p.collect(pctx, yc, log, bd.demand, idle, refresh)
	}()
	return p, nil
}

// collect gathers the page's offers until it is stopped or idle, then
// unsubscribes. A subscription yagna no longer knows (expired, 404/410) is
// made again. Every refresh it subscribes a fresh demand, collects on it
// for the window, and takes its offers in place of the old subscription's
// (bookRefresh: how a withdrawn offer is dropped).
func (p *page) collect(ctx context.Context, yc *yagna.Client, log *slog.Logger, d yagna.DemandOfferBase, idle, refresh time.Duration) {
	defer close(p.done)
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		p.mu.Lock()
		subs := []string{p.sub, p.next}
		p.mu.Unlock()
		for _, sub := range subs {
			if sub == "" {
				continue
			}
			if err := yc.UnsubscribeDemand(uctx, sub); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
				log.Warn("offer book: unsubscribing its demand", "subscription", sub, "err", err)
			}
		}
	}()
	for ctx.Err() == nil {
		p.mu.Lock()
		unused, waiting := time.Since(p.lastUse), p.waiting
		sub, next, since, nextSince, window := p.sub, p.next, p.since, p.nextSince, p.window
		p.mu.Unlock()
		if unused > idle && waiting == 0 {
			log.Debug("offer book: page idle, unsubscribed", "subscription", sub, "idle", unused.Round(time.Second))
			return
		}
		switch {
		case next == "" && time.Since(since) >= refresh:
			ns, err := yc.SubscribeDemand(ctx, renewed(d, p.began))
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// The old subscription still collects: try again next round.
				log.Warn("offer book: subscribing a fresh demand", "err", err)
				p.mu.Lock()
				p.since = time.Now()
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			p.next, p.nextSince, p.nextOffers = ns, time.Now(), map[string]*yagna.Proposal{}
			p.mu.Unlock()
			continue
		case next != "" && time.Since(nextSince) >= window:
			// The fresh subscription has had its window: its offers are
			// the market now.
			p.mu.Lock()
			old := p.sub
			p.sub, p.since, p.offers = p.next, p.nextSince, p.nextOffers
			p.next, p.nextOffers = "", nil
			p.mu.Unlock()
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := yc.UnsubscribeDemand(uctx, old); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
				log.Warn("offer book: unsubscribing the replaced demand", "subscription", old, "err", err)
			}
			cancel()
			continue
		}
		// While a refresh runs, only the fresh subscription is read: its
		// offers replace the old ones once its window has passed.
		poll, wait := sub, 2*time.Second
		if next != "" {
			poll = next
			wait = max(50*time.Millisecond, min(wait, window-time.Since(nextSince)))
		}
		evs, err := yc.CollectOffers(ctx, poll, wait, 100)
		switch {
		case err == nil || yagna.IsTimeout(err):
		case ctx.Err() != nil:
			return
		case yagna.IsNotFound(err) || yagna.IsGone(err):
			ns, serr := yc.SubscribeDemand(ctx, renewed(d, p.began))
			if serr != nil {
				p.fail(fmt.Errorf("subscribing the offer book's demand again: %w", serr))
				return
			}
			p.mu.Lock()
			if poll == p.next {
				p.next, p.nextSince, p.nextOffers = ns, time.Now(), map[string]*yagna.Proposal{}
			} else {
				p.sub = ns
			}
			p.mu.Unlock()
			continue
		default:
			p.fail(fmt.Errorf("collecting offers: %w", err))
			return
		}
		p.mu.Lock()
		into := p.offers
		if poll == p.next && p.nextOffers != nil {
			into = p.nextOffers
		}
		for _, ev := range evs {
			if ev.EventType == yagna.EventProposal && ev.Proposal != nil && ev.Proposal.State == yagna.ProposalInitial {
				// The newest offer of a provider stands: yagna hands a
				// batch's proposal events out in random order
				// (core/market/src/db/dao/negotiation_events.rs take_events).
				if o, ok := into[ev.Proposal.IssuerID]; ok && ev.Proposal.Timestamp.Before(o.Timestamp) {
					continue
				}
				into[ev.Proposal.IssuerID] = ev.Proposal
			}
		}
		p.mu.Unlock()
	}
}

func (p *page) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

// drop takes the provider's offer of props out of every page (the offers
// collected and those of a refresh under way), as yagna says it is gone:
// a counter-proposal to it failed for its unsubscribed or expired offer
// (offerGone). Only an offer of those very properties goes: a new offer
// of the provider (another price) that the page holds already stays. It
// says how many pages held it.
func (b *book) drop(provider string, props map[string]any) int {
	b.mu.Lock()
	pages := make([]*page, 0, len(b.pages))
	for _, p := range b.pages {
		pages = append(pages, p)
	}
	b.mu.Unlock()
	n := 0
	for _, p := range pages {
		p.mu.Lock()
		for _, m := range []map[string]*yagna.Proposal{p.offers, p.nextOffers} {
			if o, ok := m[provider]; ok && jsonvalue.Equal(o.Properties, props) {
				delete(m, provider)
				n++
			}
		}
		p.mu.Unlock()
	}
	return n
}

// owns says whether subscription is a live page's demand: the sweep of the
// same adapter leaves it alone (it is no leftover while this adapter runs;
// once the adapter is gone, the next sweep ends it like any other).
func (b *book) owns(subscription string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.pages {
		p.mu.Lock()
		sub, next := p.sub, p.next
		p.mu.Unlock()
		select {
		case <-p.done:
			continue
		default:
		}
		if sub == subscription || next == subscription {
			return true
		}
	}
	return false
}

// close stops every page and waits until their demands are unsubscribed.
func (b *book) close() {
	b.mu.Lock()
	b.closed = true
	for _, p := range b.pages {
		p.stop()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
