package plan

import (
	"encoding/json"

	"fmt"
	"github.com/gcompose/gcompose/core/jsondiff"
	"io"
	"strings"
)

// Render prints the plan for people, Terraform-style: one line per resource
// with its symbol (+ create, ~ update, -/+ rebuild, - delete), the reason and
// what forces a rebuild, then the config fields that change.
func (p *Plan) Render(w io.Writer, showUnchanged bool) {
	verb := map[Op]string{Create: "create", Update: "update", Rebuild: "rebuild", Delete: "delete", Forget: "forget", NoOp: "unchanged", Failed: "error"}
	width := 0
	for _, s := range p.Steps {
		if len(s.Resource) > width {
			width = len(s.Resource)
		}
	}
	for _, s := range p.Steps {
		if s.Op == NoOp && !showUnchanged && s.Drift == "" {
			continue
		}
		line := fmt.Sprintf("%3s %-9s %-*s", s.Op.Symbol(), verb[s.Op], width, s.Resource)
		var notes []string
		if s.Drift != "" && p.Mode == Refresh {
			notes = append(notes, "drift: "+s.Drift)
		}
		if s.Error != "" {
			notes = append(notes, strings.TrimPrefix(s.Error, s.Resource+": "))
		} else if s.Reason != "" {
			notes = append(notes, s.Reason)
		}
		if len(s.Forces) > 0 {
			notes = append(notes, "forced by "+strings.Join(s.Forces, ", "))
		}
		if len(notes) > 0 {
			line += "  (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
		if s.Op.Changes() {
			renderDiff(w, s)
		}
	}
	fmt.Fprintln(w, p.SummaryLine())
}

// SummaryLine is the one-line summary of a plan.
func (p *Plan) SummaryLine() string {
	s := p.Summary
	if p.Mode == Refresh {
		drift := 0
		for _, st := range p.Steps {
			if st.Drift != "" {
				drift++
			}
		}
		return fmt.Sprintf("Refresh: %d resource(s) checked, %d drifted.", len(p.Steps), drift)
	}
	failed := ""
	if s.Failed > 0 {
		failed = fmt.Sprintf(" %d resource(s) could not be planned (!): they and what depends on them are left as they are.", s.Failed)
	}
	if !p.HasChanges() {
		return fmt.Sprintf("No changes: %d resource(s) up to date.", s.Unchanged) + failed
	}
	line := fmt.Sprintf("Plan: %d to create, %d to update, %d to rebuild, %d to delete", s.Create, s.Update, s.Rebuild, s.Delete)
	if s.Forget > 0 {
		line += fmt.Sprintf(", %d to forget", s.Forget)
	}
	return line + fmt.Sprintf(", %d unchanged.", s.Unchanged) + failed
}

// renderDiff prints the config fields that change, down to the leaves that
// differ (/init/2, not a whole truncated list), with values only known after
// apply shown as such. Both sides are normalized as JSON first, so a number
// read from YAML equals the same number read back from the state.
func renderDiff(w io.Writer, s *Step) {
	before, after := normalizeJSON(map[string]any(s.Before)), normalizeJSON(map[string]any(s.After))
	if s.Before == nil {
		before = map[string]any{}
	}
	if s.After == nil {
		after = map[string]any{}
	}
	for _, c := range jsondiff.Values("", before, after) {
		switch c.Op {
		case jsondiff.Added:
			fmt.Fprintf(w, "      + %s = %s\n", c.Path, show(c.To))
		case jsondiff.Removed:
			fmt.Fprintf(w, "      - %s = %s\n", c.Path, show(c.From))
		default:
			fmt.Fprintf(w, "      ~ %s = %s -> %s\n", c.Path, show(c.From), show(c.To))
		}
	}
}

// show renders a value compactly; strings still holding ${...} are only
// known after apply.
func show(v any) string {
	if s, ok := v.(string); ok && strings.Contains(s, "${") && !strings.Contains(s, "$${") {
		return fmt.Sprintf("(known after apply: %s)", s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 120 {
		return string(b[:117]) + "..."
	}
	return string(b)
}
