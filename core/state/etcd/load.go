package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/gcompose/gcompose/core/state"
)

// readHead reads app's head; nil when the application has no state.
func (s *Store) readHead(ctx context.Context, app string, opts ...clientv3.OpOption) (*head, int64, int64, error) {
	resp, err := s.cli.Get(ctx, s.headKey(app), opts...)
	if err != nil {
		return nil, 0, 0, err
	}
	s.stats.response(proto.Size((*pb.RangeResponse)(resp)))
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, nil
	}
	hd, err := s.parseHead(app, resp.Kvs[0].Value)
	return hd, resp.Kvs[0].ModRevision, resp.Header.Revision, err
}

func (s *Store) parseHead(app string, b []byte) (*head, error) {
	var hd head
	if err := decodeStrict(b, &hd); err != nil {
		return nil, fmt.Errorf("state head %s in %s: %v: %w", s.headKey(app), s.where, err, state.ErrCorrupt)
	}
	if hd.FormatVersion > state.FormatVersion {
		return nil, fmt.Errorf("state head %s in %s has format version %d; this gcompose reads up to %d: upgrade gcompose", s.headKey(app), s.where, hd.FormatVersion, state.FormatVersion)
	}
	return &hd, nil
}

// Load implements state.Store: the head, then its generation's resources
// page by page, all at the head's revision.
func (s *Store) Load(ctx context.Context, app string) (*state.Document, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("state for app %q in %s: load", app, s.where)
	var doc *state.Document
	err := s.retryEach(ctx, what, 10*time.Minute, func(ctx context.Context, _ int) error {
		d, err := s.load(ctx, app)
		if errors.Is(err, rpctypes.ErrCompacted) {
			// etcd compacted the revision we read at: read again from the head.
			return fmt.Errorf("revision compacted during the load of %q: %w", app, errTryAgain)
		}
		doc = d
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return doc, nil
}

func (s *Store) load(ctx context.Context, app string) (*state.Document, error) {
	hctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	hd, _, rev, err := s.readHead(hctx, app)
	cancel()
	if err != nil {
		return nil, err
	}
	doc := state.NewDocument(app)
	if hd == nil {
		// No head: resource keys without one are what is left of a state.
		if found, err := s.traces(ctx, app, rev, nil); err != nil || len(found) > 0 {
			return nil, s.missing(app, found, err)
		}
		return doc, nil
	}
	doc.Lineage, doc.Serial, doc.UpdatedAt, doc.Ledger = hd.Lineage, hd.Serial, hd.UpdatedAt, hd.Ledger
	prefix := s.genKeys(app, hd.Generation)
	resPrefix := s.resPrefix(app, hd.Generation)
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	keys := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		resp, err := s.cli.Get(pctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(int64(s.cfg.PageSize)))
		cancel()
		if err != nil {
			return nil, err
		}
		s.stats.response(proto.Size((*pb.RangeResponse)(resp)))
		keys += len(resp.Kvs)
		for _, kv := range resp.Kvs {
			if !strings.HasPrefix(string(kv.Key), resPrefix) {
				if err := s.checkGenHead(app, hd, kv); err != nil {
					return nil, err
				}
				continue
			}
			r, err := state.DecodeResource(kv.Value)
			if err != nil {
				return nil, fmt.Errorf("resource key %s in %s: %v: %w", kv.Key, s.where, err, state.ErrCorrupt)
			}
			if r.Name == "" {
				return nil, fmt.Errorf("resource key %s in %s: no name: %w", kv.Key, s.where, state.ErrCorrupt)
			}
			doc.Resources[r.Name] = r
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	if keys == 0 && (hd.GenCopy || hd.Serial > 0) {
		// The generation the head names holds nothing: damage if the head
		// says it keeps a copy there, or if resources are elsewhere.
		found, err := s.traces(ctx, app, rev, &hd.Generation)
		if err != nil {
			return nil, err
		}
		if hd.GenCopy || len(found) > 0 {
			found = append([]string{fmt.Sprintf("head %s (serial %d, lineage %s) points at generation %d, which holds nothing",
				s.headKey(app), hd.Serial, hd.Lineage, hd.Generation)}, found...)
			return nil, s.missing(app, found, nil)
		}
	}
	return doc, nil
}

// checkGenHead checks the copy of the head in its generation: written in
// the same transaction, it differs only if a key was changed by hand.
func (s *Store) checkGenHead(app string, hd *head, kv *mvccKV) error {
	if string(kv.Key) != s.genHeadKey(app, hd.Generation) {
		return fmt.Errorf("unexpected key %s in %s: %w", kv.Key, s.where, state.ErrCorrupt)
	}
	cp, err := s.parseHead(app, kv.Value)
	if err != nil {
		return err
	}
	if cp.WriteID != hd.WriteID || cp.Serial != hd.Serial || cp.Lineage != hd.Lineage {
		return fmt.Errorf("head %s (serial %d, write %s) and its copy %s (serial %d, write %s) differ: one was changed by hand: %w",
			s.headKey(app), hd.Serial, hd.WriteID, kv.Key, cp.Serial, cp.WriteID, state.ErrCorrupt)
	}
	return nil
}

// missing is the error of a state whose head is lost or points at nothing.
func (s *Store) missing(app string, found []string, err error) error {
	if err != nil {
		return err
	}
	return &state.MissingDocumentError{App: app, Where: s.where, Found: found,
		Aside: "the keys of other generations are deleted when that run ends; save them first with gcompose state recover --dry-run"}
}

// generation is one generation's keys, as traces and Recover see them.
type generation struct {
	gen       uint64
	head      *head // its copy of the head, if any
	resources int
	maxRev    int64
}

// generations reads every key under app's gen/ prefix (at revision rev, 0:
// now), grouped by generation, skipping skip.
func (s *Store) generations(ctx context.Context, app string, rev int64, skip *uint64, each func(g *generation, kv *mvccKV)) ([]*generation, error) {
	prefix := s.genPrefix(app)
	end := clientv3.GetPrefixRangeEnd(prefix)
	byGen := map[uint64]*generation{}
	from := prefix
	for {
		var resp *clientv3.GetResponse
		err := s.retry(ctx, "read generations", func(ctx context.Context, _ int) error {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(s.cfg.PageSize))}
			if rev > 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			var err error
			resp, err = s.cli.Get(ctx, from, opts...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("state for app %q in %s: %w", app, s.where, err)
		}
		for _, kv := range resp.Kvs {
			rest := strings.TrimPrefix(string(kv.Key), prefix)
			var gen uint64
			if n, _ := fmt.Sscanf(rest, "%016x/", &gen); n != 1 || (skip != nil && gen == *skip) {
				continue
			}
			g := byGen[gen]
			if g == nil {
				g = &generation{gen: gen}
				byGen[gen] = g
			}
			g.maxRev = max(g.maxRev, kv.ModRevision)
			if strings.HasSuffix(rest, "/head") {
				if hd, err := s.parseHead(app, kv.Value); err == nil {
					g.head = hd
				}
			} else {
				g.resources++
			}
			if each != nil {
				each(g, kv)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	out := make([]*generation, 0, len(byGen))
	for _, g := range byGen {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].gen < out[j].gen })
	return out, nil
}

// traces describes the generations (other than skip) that hold keys.
func (s *Store) traces(ctx context.Context, app string, rev int64, skip *uint64) ([]string, error) {
	gens, err := s.generations(ctx, app, rev, skip, nil)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, g := range gens {
		d := fmt.Sprintf("%s: %d resource keys", s.genKeys(app, g.gen), g.resources)
		if g.head != nil {
			d += fmt.Sprintf(" (serial %d, lineage %s)", g.head.Serial, g.head.Lineage)
		}
		found = append(found, d)
	}
	return found, nil
}

// Apps implements state.Store: applications with a head (at least one
// write), or with resource keys left without one. It reads one key per
// application, skipping over their resources.
func (s *Store) Apps(ctx context.Context) ([]string, error) {
	base := s.key("apps/")
	end := clientv3.GetPrefixRangeEnd(base)
	var out []string
	from := base
	for {
		var resp *clientv3.GetResponse
		if err := s.retry(ctx, "list apps", func(ctx context.Context, _ int) error {
			var err error
			resp, err = s.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
			return err
		}); err != nil {
			return nil, fmt.Errorf("list applications in %s: %w", s.where, err)
		}
		if len(resp.Kvs) == 0 {
			break
		}
		rest := strings.TrimPrefix(string(resp.Kvs[0].Key), base)
		esc, _, ok := strings.Cut(rest, "/")
		if !ok {
			// A stray key directly under apps/: skip it.
			from = string(resp.Kvs[0].Key) + "\x00"
			continue
		}
		app, err := url.PathUnescape(esc)
		if err != nil {
			app = esc
		}
		var n int64
		if err := s.retry(ctx, "list apps", func(ctx context.Context, _ int) error {
			r, err := s.cli.Get(ctx, base+esc+"/head", clientv3.WithCountOnly())
			if err == nil && r.Count == 0 {
				// Resource keys without a head: a lost state, which Load
				// reports; list it so that it is found.
				r, err = s.cli.Get(ctx, base+esc+"/gen/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithLimit(1))
			}
			if err == nil {
				n = r.Count
			}
			return err
		}); err != nil {
			return nil, fmt.Errorf("list applications in %s: %w", s.where, err)
		}
		if n > 0 {
			out = append(out, app)
		}
		from = base + esc + "0" // '0' follows '/': the first key after this app's
	}
	sort.Strings(out)
	return out, nil
}

// decodeStrict decodes a value refusing unknown keys: a typo or a flipped
// byte in a key is damage, not something to ignore.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the end of the JSON value")
	}
	return nil
}
