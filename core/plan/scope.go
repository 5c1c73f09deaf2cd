package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/core/state"
)

// Matches reports whether an address given on the command line names a
// resource: exactly (services.web[1]), every instance of a service
// (services.web), or by its short name in any section (web, db).
func Matches(addr, name string) bool {
	if name == addr || strings.HasPrefix(name, addr+"[") {
		return true
	}
	if strings.Contains(addr, ".") {
		return false
	}
	_, rest, ok := strings.Cut(name, ".")
	return ok && (rest == addr || strings.HasPrefix(rest, addr+"["))
}

// SuggestAddress returns ` (did you mean "x"?)` for an address that
// matches none of names when one is close enough to be a typo, else "". A
// bare name is compared with the short names (web of services.web[1]) and
// an address with a section with the full ones, instances left out, so
// that the advice is in the form the user typed.
func SuggestAddress(addr string, names []string) string {
	seen := map[string]bool{}
	var known []string
	for _, n := range names {
		n, _, _ = strings.Cut(n, "[")
		if !strings.Contains(addr, ".") {
			if _, short, ok := strings.Cut(n, "."); ok {
				n = short
			}
		}
		if !seen[n] {
			seen[n] = true
			known = append(known, n)
		}
	}
	sort.Strings(known)
	return source.Suggest(addr, known)
}

// matchAll returns the names each address matches; an address that
// matches nothing is an error naming what exists.
func matchAll(flag string, addrs []string, names []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, a := range addrs {
		found := false
		for _, n := range names {
			if Matches(a, n) {
				out[n] = true
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("%s %s matches no resource of the application%s (it has: %s)", flag, a, SuggestAddress(a, names), strings.Join(names, ", "))
		}
	}
	return out, nil
}

// scope limits deps to what the targets need (deploy: the targets and
// everything they depend on) or take with them (destroy: the targets and
// everything that depends on them). No targets: everything.
func scope(deps map[string][]string, targets []string, mode Mode) (map[string][]string, error) {
	if len(targets) == 0 {
		return deps, nil
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Strings(names)
	in, err := matchAll("--target", targets, names)
	if err != nil {
		return nil, err
	}
	starts := make([]string, 0, len(in))
	for n := range in {
		starts = append(starts, n)
	}
	if mode == Destroy {
		in = graph.Descendants(deps, starts)
	} else {
		in = graph.Reach(deps, starts)
	}
	out := make(map[string][]string, len(in))
	for n := range in {
		// A dependency that is not a resource here is not planned.
		if ds, known := deps[n]; known {
			out[n] = ds
		}
	}
	return out, nil
}

// protectionError fails a step that would delete or rebuild a protected
// resource, saying why it would and how to allow it.
func protectionError(s *Step, r *Resource) error {
	why := s.Reason
	if why == "" {
		why = "no reason given"
	}
	return &ProtectedError{Resource: s.Resource, Op: s.Op, Reason: why, Pos: r.Pos}
}

// ProtectedError refuses a plan that would delete or rebuild a resource
// marked protect: true.
type ProtectedError struct {
	Resource string
	Op       Op // Rebuild or Delete
	Reason   string
	Pos      source.Pos
}

func (e *ProtectedError) Error() string {
	what := "delete"
	if e.Op == Rebuild {
		what = "rebuild"
	}
	at := ""
	if e.Pos.File != "" {
		at = " at " + e.Pos.String()
	}
	return fmt.Sprintf("%s is protected (protect: true%s): this plan would %s it (%s); remove protect: true to allow that", e.Resource, at, what, e.Reason)
}

// guard turns a planned delete or rebuild of a protected resource into a
// failed step; what depends on it is then held back too.
func guard(s *Step, want *Resource) error {
	if want == nil || !want.Protect || (s.Op != Rebuild && s.Op != Delete) {
		return nil
	}
	return protectionError(s, want)
}

// replaceStep forces a rebuild of a deployed resource (--replace).
func replaceStep(s *Step, old *state.Resource) {
	if old == nil || s.Op == Create || s.Op == Failed {
		return
	}
	s.Replace = true
	why := "replacement asked (--replace)"
	if s.Op != NoOp && s.Reason != "" {
		why += "; also " + s.Reason
	}
	s.Op, s.Reason = Rebuild, why
}
