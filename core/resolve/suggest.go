package resolve

import (
	"fmt"
	"strings"
)

// suggest returns ` (did you mean "x"?)` naming the known name closest to
// an unknown one, when it is close enough to be a typo, else "".
func suggest(unknown string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(unknown), strings.ToLower(k))
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	limit := 2
	if len(unknown) <= 4 {
		limit = 1
	}
	if bestD < 0 || bestD > limit && !strings.HasPrefix(best, unknown) && !strings.HasPrefix(unknown, best) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
