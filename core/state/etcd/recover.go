package etcd

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/state"
)

// Recover implements state.Recoverer: the generation the head points to if
// it holds the resources, else the newest generation whose keys are left
// (by its copy of the head, else by the revision of its keys). Its copy of
// the head gives the lineage and serial; a generation written by an older
// gcompose has none, and gets a new lineage (said in Lost).
func (s *Store) Recover(ctx context.Context, app string) (*state.Recovery, error) {
	var hd *head
	if err := s.retry(ctx, "read head", func(ctx context.Context, _ int) error {
		var err error
		hd, _, _, err = s.readHead(ctx, app)
		return err
	}); err != nil {
		return nil, fmt.Errorf("recover: state for app %q in %s: %w", app, s.where, err)
	}
	resources := map[uint64]map[string]*state.Resource{}
	var damaged []string
	gens, err := s.generations(ctx, app, 0, nil, func(g *generation, kv *mvccKV) {
		if strings.HasSuffix(string(kv.Key), "/head") {
			return
		}
		r, err := state.DecodeResource(kv.Value)
		if err != nil || r.Name == "" {
			damaged = append(damaged, fmt.Sprintf("%s: %v", kv.Key, err))
			return
		}
		if resources[g.gen] == nil {
			resources[g.gen] = map[string]*state.Resource{}
		}
		resources[g.gen][r.Name] = r
	})
	if err != nil {
		return nil, fmt.Errorf("recover: %w", err)
	}
	if len(gens) == 0 {
		return nil, fmt.Errorf("recover: nothing of the state of app %q is left in %s", app, s.where)
	}
	pick := gens[0]
	for _, g := range gens {
		switch {
		case hd != nil && g.gen == hd.Generation && g.resources > 0:
			pick = g
		case hd != nil && pick.gen == hd.Generation && pick.resources > 0:
		case newer(g, pick):
			pick = g
		}
	}
	rec := &state.Recovery{Doc: state.NewDocument(app)}
	for name, r := range resources[pick.gen] {
		rec.Doc.Resources[name] = r
	}
	from := fmt.Sprintf("%s: %d resource keys", s.genKeys(app, pick.gen), pick.resources)
	switch {
	case pick.head != nil:
		rec.Doc.Lineage, rec.Doc.Serial, rec.Doc.UpdatedAt, rec.Doc.Ledger = pick.head.Lineage, pick.head.Serial, pick.head.UpdatedAt, pick.head.Ledger
		from += fmt.Sprintf(" and its copy of the head (serial %d, lineage %s)", pick.head.Serial, pick.head.Lineage)
	case hd != nil:
		rec.Doc.Lineage, rec.Doc.Serial, rec.Doc.UpdatedAt, rec.Doc.Ledger = hd.Lineage, hd.Serial, hd.UpdatedAt, hd.Ledger
		from += fmt.Sprintf(" and the head (serial %d, lineage %s)", hd.Serial, hd.Lineage)
	default:
		rec.Doc.Lineage = state.NewID()
		rec.Lost = append(rec.Lost, fmt.Sprintf("the lineage (a generation written by an older gcompose keeps no copy of the head): the recovered state gets a new one, %s; adapters that tag what they create with the old one (${app.id}) no longer recognise it", rec.Doc.Lineage))
	}
	rec.From = append(rec.From, from)
	for _, g := range gens {
		if g != pick {
			rec.Lost = append(rec.Lost, fmt.Sprintf("%s: %d resource keys of another generation (an interrupted rewrite), not used", s.genKeys(app, g.gen), g.resources))
		}
	}
	for _, d := range damaged {
		rec.Lost = append(rec.Lost, d)
		if i := strings.LastIndex(d, "/res/"); i >= 0 {
			name, _, _ := strings.Cut(d[i+5:], ":")
			rec.LostResources = append(rec.LostResources, name)
		}
	}
	sort.Strings(rec.LostResources)
	return rec, nil
}

// newer says whether generation a was written after b.
func newer(a, b *generation) bool {
	if a.head != nil && b.head != nil {
		return a.head.Serial > b.head.Serial
	}
	if (a.head != nil) != (b.head != nil) {
		return a.head != nil
	}
	return a.maxRev > b.maxRev
}

var _ state.Recoverer = (*Store)(nil)
