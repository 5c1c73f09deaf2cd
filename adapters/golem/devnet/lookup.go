package devnet

import (
	"net/http"
	"sort"
	"time"
)

// find returns m[id], answering 404 "<kind> <id> not found" (the yagna
// error body) when there is none. Callers hold s.mu.
func find[T any](w http.ResponseWriter, m map[string]T, kind, id string) (T, bool) {
	v, ok := m[id]
	if !ok {
		writeError(w, http.StatusNotFound, "%s %s not found", kind, id)
	}
	return v, ok
}

// byCreation renders the values of m oldest first, as yagna lists them.
func byCreation[T any](m map[string]T, created func(T) time.Time, render func(T) map[string]any) []map[string]any {
	list := make([]T, 0, len(m))
	for _, v := range m {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool { return created(list[i]).Before(created(list[j])) })
	out := make([]map[string]any, 0, len(list))
	for _, v := range list {
		out = append(out, render(v))
	}
	return out
}

// providerOr404 is the provider whose id or name is id, or nil after a 404
// (s.mu held; it stays held either way).
func (s *Server) providerOr404(w http.ResponseWriter, id string) *provider {
	for _, p := range s.providers {
		if p.id == id || p.name == id {
			return p
		}
	}
	writeError(w, http.StatusNotFound, "provider %s not found", id)
	return nil
}
