package devnet

import (
	"strings"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
)

// Matcher evaluates yagna constraint expressions against flat property maps.
type Matcher interface {
	// Check reports whether the expression parses.
	Check(expr string) error
	// Match reports whether props satisfy expr ("" counts as "()").
	Match(expr string, props map[string]any) (bool, error)
}

// constraintMatcher is the Matcher backed by adapters/golem/constraint (yagna's three-valued resolver).
type constraintMatcher struct{}

func (constraintMatcher) Check(expr string) error {
	if strings.TrimSpace(expr) == "" {
		return nil
	}
	_, err := constraint.Parse(expr)
	return err
}

func (constraintMatcher) Match(expr string, props map[string]any) (bool, error) {
	if strings.TrimSpace(expr) == "" {
		return true, nil
	}
	e, err := constraint.Parse(expr)
	if err != nil {
		return false, err
	}
	return e.Match(props), nil
}
