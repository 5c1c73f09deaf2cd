package etcd

import (
	"fmt"
	"net/url"
)

func (s *Store) key(rel string) string { return s.cfg.Prefix + "/" + rel }

func (s *Store) appPrefix(app string) string { return s.key("apps/" + url.PathEscape(app) + "/") }

func (s *Store) headKey(app string) string { return s.appPrefix(app) + "head" }

func (s *Store) lockKey(app string) string { return s.appPrefix(app) + "lock" }

func (s *Store) genPrefix(app string) string { return s.appPrefix(app) + "gen/" }

func (s *Store) resPrefix(app string, gen uint64) string {
	return fmt.Sprintf("%s%016x/res/", s.genPrefix(app), gen)
}

func (s *Store) resKey(app string, gen uint64, name string) string {
	return s.resPrefix(app, gen) + url.PathEscape(name)
}

func (s *Store) genKeys(app string, gen uint64) string {
	return fmt.Sprintf("%s%016x/", s.genPrefix(app), gen)
}

// genHeadKey is the copy of the head kept in its generation.
func (s *Store) genHeadKey(app string, gen uint64) string { return s.genKeys(app, gen) + "head" }

// ---- retries
