package constraint

import (
	"fmt"
	"strings"
)

// CapabilitiesKey is the Offer property listing a provider's runtime
// capabilities (vpn, inet, manifest-support).
const CapabilitiesKey = "golem.runtime.capabilities"

// FromGAP16 translates a GAP-16 payload's constraints and capabilities into one
// filter. Each constraint is either a bare predicate ("golem.inf.cpu.cores=2",
// "golem.inf.mem.gib >= 4") that gets parenthesized, or already a filter
// ("(golem.inf.mem.gib>=4)", "(|(a=1)(b=2))"). Capabilities become
// "(golem.runtime.capabilities=<cap>)". Everything is AND-joined in order; one
// item stays unwrapped; none gives "()". The result is canonical (see Expr.String).
func FromGAP16(constraints, capabilities []string) (string, error) {
	exprs := make([]Expr, 0, len(constraints)+len(capabilities))
	for i, c := range constraints {
		c = strings.TrimSpace(c)
		if c == "" {
			return "", fmt.Errorf("constraint %d is empty", i)
		}
		src := c
		if !strings.HasPrefix(c, "(") {
			src = "(" + c + ")"
		}
		x, err := Parse(src)
		if err != nil {
			return "", fmt.Errorf("constraint %d %q: %w", i, c, err)
		}
		if _, ok := x.(Empty); ok {
			continue
		}
		exprs = append(exprs, x)
	}
	for i, c := range capabilities {
		c = strings.TrimSpace(c)
		if c == "" || strings.ContainsAny(c, "()*") {
			return "", fmt.Errorf("capability %d %q: must be a non-empty name without '(', ')' or '*'", i, capabilities[i])
		}
		exprs = append(exprs, Compare{Key: CapabilitiesKey, Op: Eq, Value: c})
	}
	return AndOf(exprs...).String(), nil
}
