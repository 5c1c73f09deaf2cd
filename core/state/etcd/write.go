package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/gcompose/gcompose/core/state"
)

type mvccKV = mvccpb.KeyValue

// stats counts request and response sizes (tests show they stay small).
type stats struct {
	requests, retries       atomic.Int64
	maxRequest, maxResponse atomic.Int64
	requestBytes, respBytes atomic.Int64
	responses               atomic.Int64
}

func (st *stats) request(n int) {
	st.requests.Add(1)
	st.requestBytes.Add(int64(n))
	for {
		m := st.maxRequest.Load()
		if int64(n) <= m || st.maxRequest.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

func (st *stats) response(n int) {
	st.responses.Add(1)
	st.respBytes.Add(int64(n))
	for {
		m := st.maxResponse.Load()
		if int64(n) <= m || st.maxResponse.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

// Stats are counters of a Store's traffic.
type Stats struct {
	// Writes is the number of write transactions, MaxWrite the largest (keys
	// plus values, bytes), WriteBytes their total.
	Writes, MaxWrite, WriteBytes int64
	// Reads is the number of read responses, MaxRead the largest (bytes).
	Reads, MaxRead, ReadBytes int64
	// Retries counts requests retried while etcd was unavailable.
	Retries int64
}

// Stats returns the counters since New.
func (s *Store) Stats() Stats {
	st := s.stats
	return Stats{
		Writes: st.requests.Load(), MaxWrite: st.maxRequest.Load(), WriteBytes: st.requestBytes.Load(),
		Reads: st.responses.Load(), MaxRead: st.maxResponse.Load(), ReadBytes: st.respBytes.Load(),
		Retries: st.retries.Load(),
	}
}

// ensureHead reads the head once per holder; afterwards this holder's own
// writes keep it current (nobody else can write while the lock is held).
func (s *Store) ensureHead(ctx context.Context, h *held) error {
	if h.head != nil {
		return nil
	}
	return s.retry(ctx, "read head", func(ctx context.Context, _ int) error {
		hd, modRev, _, err := s.readHead(ctx, h.app)
		if err != nil {
			return err
		}
		if hd == nil {
			hd = &head{}
		}
		h.head, h.headRev = hd, modRev
		return nil
	})
}

func (s *Store) lockCmp(h *held) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(s.lockKey(h.app)), "=", h.createRev)
}

// fenced runs one transaction of ops (idempotent: puts and deletes) if h
// still holds the lock.
func (s *Store) fenced(ctx context.Context, l *state.Lock, h *held, what string, ops []clientv3.Op, size int) error {
	var lost []*mvccKV
	err := s.retry(ctx, what, func(ctx context.Context, _ int) error {
		s.stats.request(size)
		resp, err := s.cli.Txn(ctx).If(s.lockCmp(h)).Then(ops...).Else(clientv3.OpGet(s.lockKey(h.app))).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			lost = resp.Responses[0].GetResponseRange().Kvs
			if lost == nil {
				lost = []*mvccKV{}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("state for app %q in %s: %s: %w", h.app, s.where, what, err)
	}
	if lost != nil {
		return s.fenceFailed(l, h, lost)
	}
	return nil
}

// commit runs ops and writes next as the head in one transaction, if h still
// holds the lock and the head is the one h last saw. It is safe to retry: a
// retry that finds next's WriteID in the head knows the first attempt
// committed.
func (s *Store) commit(ctx context.Context, l *state.Lock, h *held, ops []clientv3.Op, size int, next *head) error {
	next.App = h.app
	next.FormatVersion = state.FormatVersion
	next.WriteID = state.NewID()
	next.GenCopy = true
	val, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("state for app %q: head: %w", h.app, err)
	}
	hk, lk := s.headKey(h.app), s.lockKey(h.app)
	gk := s.genHeadKey(h.app, next.Generation)
	ops = append(ops, clientv3.OpPut(hk, string(val)), clientv3.OpPut(gk, string(val)))
	size += len(hk) + len(gk) + 2*len(val)
	var lost []*mvccKV
	var conflict bool
	what := fmt.Sprintf("state for app %q in %s: write serial %d", h.app, s.where, next.Serial)
	err = s.retry(ctx, what, func(ctx context.Context, _ int) error {
		lost, conflict = nil, false
		s.stats.request(size)
		resp, err := s.cli.Txn(ctx).
			If(s.lockCmp(h), clientv3.Compare(clientv3.ModRevision(hk), "=", h.headRev)).
			Then(ops...).
			Else(clientv3.OpGet(lk), clientv3.OpGet(hk)).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			h.headRev = resp.Header.Revision
			return nil
		}
		if hkv := resp.Responses[1].GetResponseRange().Kvs; len(hkv) > 0 {
			var cur head
			if json.Unmarshal(hkv[0].Value, &cur) == nil && cur.WriteID == next.WriteID {
				h.headRev = hkv[0].ModRevision // an earlier attempt committed
				return nil
			}
		}
		lkv := resp.Responses[0].GetResponseRange().Kvs
		if len(lkv) == 0 || lkv[0].CreateRevision != h.createRev {
			lost = lkv
			if lost == nil {
				lost = []*mvccKV{}
			}
			return nil
		}
		conflict = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if lost != nil {
		return s.fenceFailed(l, h, lost)
	}
	if conflict {
		h.head = nil // read it again next time
		return fmt.Errorf("%s: the head was changed by another writer using the same lock; nothing written", what)
	}
	h.head = next
	return nil
}

// Apply implements state.Store: one transaction putting or deleting the
// changed resources' keys and writing the head with serial+1.
//
// Concurrent Applies under one lock share transactions (group commit): while
// one transaction is in flight, the Applies that arrive queue up, and the
// next transaction carries all of them (as many as fit), with the serial
// raised by their number. Each Apply returns once the transaction holding
// its changes committed.
func (s *Store) Apply(ctx context.Context, l *state.Lock, changes ...state.Change) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now().UTC()
	prepared, err := state.PrepareChanges(changes, now)
	if err != nil {
		app := ""
		if l != nil {
			app = l.App
		}
		return fmt.Errorf("state for app %q: %w", app, err)
	}
	h, err := s.holder(ctx, l)
	if err != nil {
		return err
	}
	if len(prepared) == 0 {
		h.mu.Lock()
		defer h.mu.Unlock()
		return s.fenced(ctx, l, h, "check lock", nil, 0)
	}
	req := &applyReq{ctx: ctx, changes: prepared, done: make(chan error, 1)}
	h.qmu.Lock()
	h.queue = append(h.queue, req)
	h.qmu.Unlock()
	h.mu.Lock()
	select {
	case err := <-req.done: // a previous leader's transaction carried it
		h.mu.Unlock()
		return err
	default:
	}
	h.qmu.Lock()
	batch := h.queue
	h.queue = nil
	h.qmu.Unlock()
	bctx, cancel := batchContext(batch)
	s.applyBatch(bctx, l, h, batch)
	cancel()
	h.mu.Unlock()
	return <-req.done
}

// batchContext is the context of a transaction carrying several callers'
// changes: cancelled only once every one of them gave up, so that one
// caller's cancellation does not fail the others' writes.
func batchContext(batch []*applyReq) (context.Context, context.CancelFunc) {
	if len(batch) == 1 {
		return batch[0].ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(batch[0].ctx))
	stop := make(chan struct{})
	go func() {
		for _, r := range batch {
			select {
			case <-r.ctx.Done():
			case <-stop:
				return
			}
		}
		cancel(context.Cause(batch[len(batch)-1].ctx))
	}()
	return ctx, func() {
		close(stop)
		cancel(nil)
	}
}

// applyReq is one Apply waiting for its transaction.
type applyReq struct {
	ctx     context.Context
	changes []state.Change
	ops     []keyOp
	size    int
	done    chan error
}

type keyOp struct {
	key, val string
	del      bool
}

// encode turns req's changes into key operations in generation gen.
func (s *Store) encode(h *held, gen uint64, req *applyReq) error {
	req.ops, req.size = nil, 0
	for _, ch := range req.changes {
		if ch.Put == nil {
			k := s.resKey(h.app, gen, ch.Delete)
			req.ops = append(req.ops, keyOp{key: k, del: true})
			req.size += len(k)
			continue
		}
		b, err := json.Marshal(ch.Put)
		if err != nil {
			return fmt.Errorf("state for app %q: resource %q: %w", h.app, ch.Put.Name, err)
		}
		k := s.resKey(h.app, gen, ch.Put.Name)
		if len(k)+len(b) > s.cfg.MaxTxnBytes {
			return fmt.Errorf("state for app %q: resource %q is %d bytes of JSON, more than one etcd request may carry (%d)", h.app, ch.Put.Name, len(b), s.cfg.MaxTxnBytes)
		}
		req.ops = append(req.ops, keyOp{key: k, val: string(b)})
		req.size += len(k) + len(b)
	}
	return nil
}

// applyBatch commits the queued Applies in as few transactions as fit, and
// answers each. h.mu is held.
func (s *Store) applyBatch(ctx context.Context, l *state.Lock, h *held, batch []*applyReq) {
	if err := s.ensureHead(ctx, h); err != nil {
		err = fmt.Errorf("state for app %q in %s: %w", h.app, s.where, err)
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	var chunk []*applyReq
	nops, size := 0, 0
	flush := func() {
		if len(chunk) == 0 {
			return
		}
		err := s.commitChunk(ctx, l, h, chunk)
		for _, r := range chunk {
			r.done <- err
		}
		chunk, nops, size = nil, 0, 0
	}
	for _, r := range batch {
		if err := s.encode(h, h.head.Generation, r); err != nil {
			r.done <- err
			continue
		}
		// +2: the head and its copy in the generation.
		if len(r.ops)+2 > s.cfg.MaxTxnOps || r.size+1024 > s.cfg.MaxTxnBytes {
			flush()
			r.done <- s.applyLarge(ctx, l, h, r.changes)
			continue
		}
		if nops+len(r.ops)+2 > s.cfg.MaxTxnOps || size+r.size+1024 > s.cfg.MaxTxnBytes {
			flush()
		}
		chunk = append(chunk, r)
		nops += len(r.ops)
		size += r.size
	}
	flush()
}

// commitChunk writes the changes of several Applies in one transaction, the
// serial raised by their number.
func (s *Store) commitChunk(ctx context.Context, l *state.Lock, h *held, chunk []*applyReq) error {
	cur := h.head
	next := &head{Lineage: cur.Lineage, Serial: cur.Serial + uint64(len(chunk)), Generation: cur.Generation, UpdatedAt: time.Now().UTC()}
	var chs [][]state.Change
	for _, r := range chunk {
		chs = append(chs, r.changes)
	}
	next.Ledger = withEnded(cur.Ledger, next.UpdatedAt, chs...)
	if next.Lineage == "" {
		next.Lineage = state.NewID()
	}
	// The last operation on a key wins (etcd refuses a key twice in a transaction).
	last := map[string]int{}
	var all []keyOp
	for _, r := range chunk {
		for _, op := range r.ops {
			last[op.key] = len(all)
			all = append(all, op)
		}
	}
	var ops []clientv3.Op
	size := 0
	for i, op := range all {
		if last[op.key] != i {
			continue
		}
		if op.del {
			ops = append(ops, clientv3.OpDelete(op.key))
		} else {
			ops = append(ops, clientv3.OpPut(op.key, op.val))
		}
		size += len(op.key) + len(op.val)
	}
	return s.commit(ctx, l, h, ops, size, next)
}

// applyLarge applies changes too big for one transaction by writing a new
// generation with them.
func (s *Store) applyLarge(ctx context.Context, l *state.Lock, h *held, changes []state.Change) error {
	cur := h.head
	next := &head{Lineage: cur.Lineage, Serial: cur.Serial + 1, UpdatedAt: time.Now().UTC()}
	next.Ledger = withEnded(cur.Ledger, next.UpdatedAt, changes)
	if next.Lineage == "" {
		next.Lineage = state.NewID()
	}
	var doc *state.Document
	err := s.retryEach(ctx, "load", 10*time.Minute, func(ctx context.Context, _ int) error {
		var err error
		doc, err = s.load(ctx, h.app)
		return err
	})
	if err != nil {
		return fmt.Errorf("state for app %q in %s: load for a large apply: %w", h.app, s.where, err)
	}
	if doc.Serial != cur.Serial {
		h.head = nil
		return fmt.Errorf("state for app %q in %s: stored serial %d, this holder wrote %d: written by someone else", h.app, s.where, doc.Serial, cur.Serial)
	}
	for _, ch := range changes {
		if ch.Put != nil {
			doc.Resources[ch.Put.Name] = ch.Put
		} else {
			delete(doc.Resources, ch.Delete)
		}
	}
	return s.rewrite(ctx, l, h, doc.Resources, next)
}

// rewrite stores resources as a new generation: batches of puts into a key
// range no reader looks at, then one transaction switching the head to it and
// deleting the old generation.
func (s *Store) rewrite(ctx context.Context, l *state.Lock, h *held, resources map[string]*state.Resource, next *head) error {
	old := h.head.Generation
	next.Generation = old + 1
	gp := func(g uint64) string { return fmt.Sprintf("%s%016x/", s.genPrefix(h.app), g) }
	// Leftovers of an interrupted rewrite to the same generation.
	if err := s.fenced(ctx, l, h, "clear new generation", []clientv3.Op{clientv3.OpDelete(gp(next.Generation), clientv3.WithPrefix())}, len(gp(next.Generation))); err != nil {
		return err
	}
	names := make([]string, 0, len(resources))
	for n := range resources {
		names = append(names, n)
	}
	var batch []clientv3.Op
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := s.fenced(ctx, l, h, fmt.Sprintf("write generation %d", next.Generation), batch, size)
		batch, size = nil, 0
		return err
	}
	for _, n := range names {
		r := resources[n]
		b, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("state for app %q: resource %q: %w", h.app, n, err)
		}
		k := s.resKey(h.app, next.Generation, n)
		if len(k)+len(b) > s.cfg.MaxTxnBytes {
			return fmt.Errorf("state for app %q: resource %q is %d bytes of JSON, more than one etcd request may carry (%d)", h.app, n, len(b), s.cfg.MaxTxnBytes)
		}
		if len(batch)+1 > s.cfg.MaxTxnOps-1 || size+len(k)+len(b) > s.cfg.MaxTxnBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, clientv3.OpPut(k, string(b)))
		size += len(k) + len(b)
	}
	if err := flush(); err != nil {
		return err
	}
	return s.commit(ctx, l, h, []clientv3.Op{clientv3.OpDelete(gp(old), clientv3.WithPrefix())}, len(gp(old)), next)
}

// Compact implements state.Store. Resources already live in one key each, so
// there is nothing to fold; it checks the lock and deletes generations left
// by an interrupted large write.
func (s *Store) Compact(ctx context.Context, l *state.Lock) error {
	h, err := s.holder(ctx, l)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.ensureHead(ctx, h); err != nil {
		return fmt.Errorf("state for app %q in %s: %w", h.app, s.where, err)
	}
	all := s.genPrefix(h.app)
	cur := fmt.Sprintf("%s%016x/", all, h.head.Generation)
	ops := []clientv3.Op{
		clientv3.OpDelete(all, clientv3.WithRange(cur)),
		clientv3.OpDelete(clientv3.GetPrefixRangeEnd(cur), clientv3.WithRange(clientv3.GetPrefixRangeEnd(all))),
	}
	return s.fenced(ctx, l, h, "compact", ops, 2*len(all))
}

// Replace implements state.Store: refused for another lineage or an older
// serial unless force; written as a new generation.
func (s *Store) Replace(ctx context.Context, l *state.Lock, doc *state.Document, force bool) error {
	if doc == nil {
		return errors.New("state replace: nil document")
	}
	h, err := s.holder(ctx, l)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.fenced(ctx, l, h, "check lock", nil, 0); err != nil {
		return err
	}
	if err := s.ensureHead(ctx, h); err != nil {
		return fmt.Errorf("state for app %q in %s: %w", h.app, s.where, err)
	}
	cur := h.head
	app := h.app
	if !force && cur.Lineage == "" {
		// No head: resource keys without one are a lost state, which only
		// a forced replace (state recover, --force-new-state) overwrites.
		found, err := s.traces(ctx, app, 0, nil)
		if err != nil {
			return err
		}
		if len(found) > 0 {
			return fmt.Errorf("%w; replace it with force", s.missing(app, found, nil))
		}
	}
	if !force {
		if cur.Lineage != "" && doc.Lineage != "" && doc.Lineage != cur.Lineage {
			return fmt.Errorf("state for app %q: the new document has lineage %s, the stored state %s (a different deployment); use force to overwrite", app, doc.Lineage, cur.Lineage)
		}
		if doc.Serial < cur.Serial {
			return fmt.Errorf("state for app %q: the new document has serial %d, older than the stored %d; use force to overwrite", app, doc.Serial, cur.Serial)
		}
	}
	if doc.FormatVersion > state.FormatVersion {
		return fmt.Errorf("state for app %q: the new document has format version %d; this gcompose writes %d", app, doc.FormatVersion, state.FormatVersion)
	}
	next := &head{Lineage: doc.Lineage, Serial: max(doc.Serial, cur.Serial+1), UpdatedAt: time.Now().UTC(), Ledger: slices.Clone(doc.Ledger)}
	if next.Lineage == "" {
		next.Lineage = cur.Lineage
	}
	if next.Lineage == "" {
		next.Lineage = state.NewID()
	}
	resources := make(map[string]*state.Resource, len(doc.Resources))
	for name, r := range doc.Resources {
		if r == nil {
			return fmt.Errorf("state for app %q: the new document's resource %q is null", app, name)
		}
		c := r.Clone()
		c.Name = name
		resources[name] = c
	}
	return s.rewrite(ctx, l, h, resources, next)
}

// Remove deletes the application's state (head and resources) in one
// transaction (gcompose state mv --remove-source): afterwards Load returns
// an empty document and Apps no longer lists it. The lock stays held.
func (s *Store) Remove(ctx context.Context, l *state.Lock) error {
	h, err := s.holder(ctx, l)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := []clientv3.Op{clientv3.OpDelete(s.headKey(h.app)), clientv3.OpDelete(s.genPrefix(h.app), clientv3.WithPrefix())}
	if err := s.fenced(ctx, l, h, "remove", ops, 0); err != nil {
		return err
	}
	h.head, h.headRev = &head{}, 0
	return nil
}
