package source

import (
	"fmt"
	"strings"
)

// Suggest returns ` (did you mean "x"?)` naming the known name closest to an
// unknown one, when it is close enough to be a typo, else "". The loader
// uses it for unknown keys and the resolver for unknown names, so both give
// the same advice.
func Suggest(unknown string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		d := EditDistance(strings.ToLower(unknown), strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := 2
	if len(unknown) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit && !(len(unknown) >= 3 && (strings.HasPrefix(best, unknown) || strings.HasPrefix(unknown, best))) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// EditDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours cost 1.
// Strings over 64 runes are no typo of a name; their distance is bounded by
// their length without the quadratic work (the fuzzer found that runaway).
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return max(len(ra), len(rb))
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
