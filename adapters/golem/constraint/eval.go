package constraint

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// lookup finds key in flat props, or by walking nested maps along its dots.
func lookup(props map[string]any, key string) (any, bool) {
	if props == nil {
		return nil, false
	}
	if v, ok := props[key]; ok {
		return v, true
	}
	// nested: try every split point "a.b" + rest
	for i := 0; i < len(key); i++ {
		if key[i] != '.' {
			continue
		}
		sub, ok := props[key[:i]]
		if !ok {
			continue
		}
		m, ok := sub.(map[string]any)
		if !ok {
			continue
		}
		if v, ok := lookup(m, key[i+1:]); ok {
			return v, true
		}
	}
	return nil, false
}

// typedKey splits "name@v" into ("name", 'v', true) for the type suffixes yagna
// knows: @v version, @t datetime, @d decimal.
func typedKey(key string) (string, byte, bool) {
	if len(key) > 2 && key[len(key)-2] == '@' {
		switch k := key[len(key)-1]; k {
		case 'v', 't', 'd':
			return key[:len(key)-2], k, true
		}
	}
	return key, 0, false
}

func fromCmp(op Op, c int) Result {
	var ok bool
	switch op {
	case Eq:
		ok = c == 0
	case Ne:
		ok = c != 0
	case Lt:
		ok = c < 0
	case Le:
		ok = c <= 0
	case Gt:
		ok = c > 0
	case Ge:
		ok = c >= 0
	}
	if ok {
		return True
	}
	return False
}

func boolResult(b bool) Result {
	if b {
		return True
	}
	return False
}

func compareTyped(kind byte, v any, op Op, want string) Result {
	s, ok := v.(string)
	switch kind {
	case 'v':
		if !ok {
			return Undefined
		}
		pv, err := parseVersion(s)
		if err != nil {
			return Undefined
		}
		wv, err := parseVersion(want)
		if err != nil {
			return False
		}
		return fromCmp(op, pv.compare(wv))
	case 't':
		if !ok {
			return Undefined
		}
		pt, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return Undefined
		}
		wt, err := time.Parse(time.RFC3339Nano, want)
		if err != nil {
			return False
		}
		return fromCmp(op, pt.Compare(wt))
	case 'd':
		var pd *big.Rat
		if ok {
			r, good := new(big.Rat).SetString(strings.TrimSpace(s))
			if !good {
				return Undefined
			}
			pd = r
		} else if f, isNum := jsonvalue.Number(v); isNum && !math.IsNaN(f) && !math.IsInf(f, 0) {
			pd = new(big.Rat).SetFloat64(f)
		} else {
			return Undefined
		}
		wd, good := new(big.Rat).SetString(want)
		if !good {
			return False
		}
		return fromCmp(op, pd.Cmp(wd))
	}
	return Undefined
}

func compareValue(v any, op Op, want string) Result {
	switch x := v.(type) {
	case string:
		switch op {
		case Eq:
			return boolResult(glob(want, x))
		case Ne:
			return boolResult(!glob(want, x))
		}
		return fromCmp(op, strings.Compare(x, want))
	case bool:
		w, err := strconv.ParseBool(want)
		if err != nil {
			return False
		}
		switch op {
		case Eq:
			return boolResult(x == w)
		case Ne:
			return boolResult(x != w)
		}
		return False
	case []any:
		return compareList(x, op, want)
	case []string:
		l := make([]any, len(x))
		for i, s := range x {
			l[i] = s
		}
		return compareList(l, op, want)
	case map[string]any:
		return Undefined
	}
	if f, ok := jsonvalue.Number(v); ok {
		w, err := strconv.ParseFloat(want, 64)
		if err != nil || math.IsNaN(w) || math.IsNaN(f) {
			return False
		}
		switch {
		case f < w:
			return fromCmp(op, -1)
		case f > w:
			return fromCmp(op, 1)
		}
		return fromCmp(op, 0)
	}
	return Undefined
}

func compareList(list []any, op Op, want string) Result {
	var eq bool
	switch op {
	case Eq, Ne:
	default:
		return False // ordering is meaningless for lists
	}
	if items, ok := parseListLiteral(want); ok {
		// set equality, as yagna: same length and each wanted item present
		eq = len(items) == len(list)
		for _, it := range items {
			if !eq {
				break
			}
			eq = listHas(list, it)
		}
	} else {
		eq = listHas(list, want)
	}
	if op == Ne {
		eq = !eq
	}
	return boolResult(eq)
}

func listHas(list []any, want string) bool {
	for _, it := range list {
		if it == nil {
			continue
		}
		if compareValue(it, Eq, want) == True {
			return true
		}
	}
	return false
}

// parseListLiteral parses "[a, b, c]" into its trimmed items.
func parseListLiteral(s string) ([]string, bool) {
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, false
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	if inner == "" {
		return []string{}, true
	}
	parts := strings.Split(inner, ",")
	for i := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(parts[i]), `"`)
	}
	return parts, true
}

// glob matches s against pattern where '*' stands for any run of characters
// (possibly empty); every other character matches itself. Linear-time
// backtracking on the last star (no regexp, so no pathological patterns).
func glob(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == s[i]:
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// version is a semantic version (major.minor.patch[-pre][+build]).
type version struct {
	nums [3]uint64
	pre  []string
}

func parseVersion(s string) (version, error) {
	var v version
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	core := s
	if i := strings.IndexByte(s, '-'); i >= 0 {
		core = s[:i]
		pre := s[i+1:]
		if pre == "" {
			return v, strconv.ErrSyntax
		}
		v.pre = strings.Split(pre, ".")
	}
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return v, strconv.ErrSyntax
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v, err
		}
		v.nums[i] = n
	}
	return v, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (v version) compare(w version) int {
	for i := range v.nums {
		if c := cmpUint(v.nums[i], w.nums[i]); c != 0 {
			return c
		}
	}
	switch {
	case len(v.pre) == 0 && len(w.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(w.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(w.pre); i++ {
		a, b := v.pre[i], w.pre[i]
		an, aerr := strconv.ParseUint(a, 10, 64)
		bn, berr := strconv.ParseUint(b, 10, 64)
		switch {
		case aerr == nil && berr == nil:
			if c := cmpUint(an, bn); c != 0 {
				return c
			}
		case aerr == nil:
			return -1
		case berr == nil:
			return 1
		default:
			if c := strings.Compare(a, b); c != 0 {
				return c
			}
		}
	}
	return cmpUint(uint64(len(v.pre)), uint64(len(w.pre)))
}
