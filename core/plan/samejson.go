package plan

import (
	"encoding/json"
	"reflect"
	"sort"
)

// normalizeJSON makes values decoded from different sources comparable
// (numbers as float64, nested maps as map[string]any).
func normalizeJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// SameJSON reports whether two trees are equal as JSON: numbers compare by
// value whatever their Go type (1 from YAML equals 1.0 from a state file).
// It walks the common decoded shapes directly, because a re-deploy compares
// every resource's config and outputs and a JSON round trip for each was a
// tenth of its time; anything else falls back to the round trip.
func SameJSON(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return ok && len(x) == 0 && len(y) == 0
		}
		for k, v := range x {
			w, found := y[k]
			if !found || !SameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !SameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	return reflect.DeepEqual(normalizeJSON(a), normalizeJSON(b))
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// diffKeys lists the top-level keys whose values differ.
func diffKeys(a, b map[string]any) []string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		if !SameJSON(a[k], b[k]) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
