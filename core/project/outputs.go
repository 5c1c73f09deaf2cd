package project

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

// Outputs are the descriptor's outputs: section evaluated.
type Outputs struct {
	// Values by output name. An output whose reference is not reported
	// keeps its ${...} text.
	Values map[string]any
	// Missing names each output that is not reported, with the reference
	// that is not ("url (${services.web.state.url} is not reported)").
	Missing []string
	// Err is why they could not be evaluated at all.
	Err error
}

// AppOutputs evaluates an outputs: section against what the state records
// each resource reports. A resource that is not deployed, or does not
// report the field, makes its outputs Missing.
func AppOutputs(doc *state.Document, outputs map[string]any) Outputs {
	if len(outputs) == 0 {
		return Outputs{}
	}
	values, unknown, err := plan.ResolveConfig(outputs, plan.RecordedOutputs(doc))
	if err != nil {
		return Outputs{Err: fmt.Errorf("outputs: %w", err)}
	}
	var missing []string
	seen := map[string]bool{}
	for _, u := range unknown {
		name := strings.SplitN(strings.TrimPrefix(u.Pointer, "/"), "/", 2)[0]
		if !seen[name] {
			seen[name] = true
			missing = append(missing, name+" ("+u.Ref.Text()+" is not reported)")
		}
	}
	sort.Strings(missing)
	return Outputs{Values: values, Missing: missing}
}
