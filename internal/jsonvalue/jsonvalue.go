// Package jsonvalue compares values as JSON: trees of maps, lists and
// scalars decoded from YAML, from JSON, or built in Go, where the same number
// may be an int in one and a float64 or json.Number in the other. The
// planner, the executor, gcompose diff and the Golem constraint matcher all
// compare through it, so that "equal" means one thing.
package jsonvalue

import (
	"encoding/json"
	"reflect"
)

// Number is v as a float64 when v is a number of any Go numeric type or a
// json.Number.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// Normalize is v after a JSON round trip: numbers as float64, structs and
// named types as map[string]any and []any. A value that does not marshal is
// returned as it is.
func Normalize(v any) any {
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

// Equal reports whether a and b are equal as JSON: numbers compare by value
// whatever their Go type (1 from YAML equals 1.0 from a state file). A nil
// map equals an empty one (a config left out and one written {}), but not
// nil itself. It walks the decoded shapes directly, because a re-deploy
// compares every resource's config and outputs and a JSON round trip for
// each was a tenth of its time; other types are compared after Normalize.
func Equal(a, b any) bool {
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
		if !ok {
			return !plain(b) && slowEqual(a, b)
		}
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, found := y[k]
			if !found || !Equal(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			return !plain(b) && slowEqual(a, b)
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if fa, ok := Number(a); ok {
		fb, ok := Number(b)
		return ok && fa == fb
	}
	return slowEqual(a, b)
}

// plain says whether v is of a type Equal's fast path knows: then a
// difference of type is a difference of value.
func plain(v any) bool {
	switch v.(type) {
	case nil, string, bool, map[string]any, []any:
		return true
	}
	_, ok := Number(v)
	return ok
}

func slowEqual(a, b any) bool {
	return reflect.DeepEqual(Normalize(a), Normalize(b))
}
