package plan

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/jsondiff"
	"github.com/gcompose/gcompose/internal/jsonvalue"
	"github.com/gcompose/gcompose/protocol"
)

// RenderOptions say how Render prints a plan.
type RenderOptions struct {
	// ShowUnchanged lists the resources that do not change too.
	ShowUnchanged bool
	// Width wraps long values at this many columns (a terminal's width);
	// 0 prints every value on one line, whole.
	Width int
}

// Render prints the plan for people, Terraform-style: one line per resource
// with its symbol (+ create, ~ update, -/+ rebuild, - delete), the reason and
// what forces a rebuild, then the config fields that change.
func (p *Plan) Render(w io.Writer, opt RenderOptions) {
	verb := map[Op]string{Create: "create", Update: "update", Rebuild: "rebuild", Delete: "delete", Forget: "forget", NoOp: "unchanged", Failed: "error"}
	width := 0
	for _, s := range p.Steps {
		if len(s.Resource) > width {
			width = len(s.Resource)
		}
	}
	for _, s := range p.Steps {
		if s.Op == NoOp && !opt.ShowUnchanged && s.Drift == "" {
			continue
		}
		v := verb[s.Op]
		if s.Op == NoOp && s.Drift != "" && p.Mode == Refresh {
			v = "drifted" // refresh changes nothing, but "unchanged" beside a drift reads as a contradiction
		}
		line := fmt.Sprintf("%3s %-9s %-*s", s.Symbol(), v, width, s.Resource)
		var notes []string
		if s.Drift != "" && p.Mode == Refresh {
			notes = append(notes, "drift: "+s.Drift)
		}
		if s.Error != "" {
			notes = append(notes, s.ErrorReason())
		} else if s.Reason != "" {
			notes = append(notes, s.Reason)
		}
		if len(s.Forces) > 0 {
			notes = append(notes, "forced by "+strings.Join(s.Forces, ", "))
		}
		if len(notes) > 0 {
			line += "  (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintln(w, jsondiff.Wrap(strings.TrimRight(line, " "), 14+width, opt.Width))
		if s.Cost != nil && s.Op != Delete && s.Op != Forget {
			fmt.Fprintln(w, jsondiff.Wrap("      cost: "+CostText(*s.Cost), 12, opt.Width))
		}
		if s.Op.Changes() {
			renderDiff(w, s, opt.Width)
		}
		if s.Op == Rebuild || s.Op == Update {
			renderPlanned(w, s, opt.Width)
		}
	}
	for _, c := range p.Cost {
		fmt.Fprintln(w, jsondiff.Wrap(fmt.Sprintf("Cost: %s %s/hour; at most %s %s if each runs its whole period (%d resource(s)).",
			amount(c.PerHour), c.Currency, amount(c.Total), c.Currency, c.Resources), 6, opt.Width))
	}
	fmt.Fprintln(w, jsondiff.Wrap(p.SummaryLine(), 6, opt.Width))
	if len(p.Targets) > 0 {
		fmt.Fprintln(w, jsondiff.Wrap("Targeted: only "+strings.Join(p.Targets, ", ")+" and what they need were planned; the rest is left as it is.", 6, opt.Width))
	}
}

// CostText is one resource's cost for people.
func CostText(c protocol.Cost) string {
	t := fmt.Sprintf("%s %s/hour", amount(c.PerHour), c.Currency)
	if c.Start > 0 {
		t += fmt.Sprintf(" + %s %s to start", amount(c.Start), c.Currency)
	}
	if c.Hours > 0 {
		t += fmt.Sprintf(", %s %s for %sh", amount(c.Total), c.Currency, strconv.FormatFloat(c.Hours, 'g', 4, 64))
	}
	t += " (" + c.Basis
	if c.Note != "" {
		t += ": " + c.Note
	}
	return t + ")"
}

// amount prints an amount without float noise.
func amount(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// Drifted counts the resources whose adapter found them other than the
// state records (refresh).
func (p *Plan) Drifted() int {
	n := 0
	for _, st := range p.Steps {
		if st.Drift != "" {
			n++
		}
	}
	return n
}

// SummaryLine is the one-line summary of a plan.
func (p *Plan) SummaryLine() string {
	s := p.Summary
	if p.Mode == Refresh {
		return fmt.Sprintf("Refresh: %d resource(s) checked, %d drifted.", len(p.Steps), p.Drifted())
	}
	// "No changes" only when every resource was planned: a resource that
	// could not be planned may well need changes nobody knows of yet.
	if !p.HasChanges() && s.Failed == 0 {
		return fmt.Sprintf("No changes: %d resource(s) up to date.", s.Unchanged)
	}
	line := fmt.Sprintf("Plan: %d to create, %d to update, %d to rebuild, %d to delete", s.Create, s.Update, s.Rebuild, s.Delete)
	if s.Forget > 0 {
		line += fmt.Sprintf(", %d to forget", s.Forget)
	}
	line += fmt.Sprintf(", %d unchanged.", s.Unchanged)
	if s.Failed > 0 {
		line += fmt.Sprintf(" %d resource(s) could not be planned (!): they and what depends on them are left as they are.", s.Failed)
	}
	return line
}

// renderDiff prints the config fields that change, down to the leaves that
// differ (/init/2, not a whole truncated list), with values only known after
// apply shown as such. Both sides are normalized as JSON first, so a number
// read from YAML equals the same number read back from the state.
func renderDiff(w io.Writer, s *Step, width int) {
	before, after := jsonvalue.Normalize(map[string]any(s.Before)), jsonvalue.Normalize(map[string]any(s.After))
	if s.Before == nil {
		before = map[string]any{}
	}
	if s.After == nil {
		after = map[string]any{}
	}
	for _, c := range jsondiff.Values("", before, after) {
		var line string
		switch c.Op {
		case jsondiff.Added:
			line = fmt.Sprintf("      + %s = %s", c.Path, show(c.To))
		case jsondiff.Removed:
			line = fmt.Sprintf("      - %s = %s", c.Path, show(c.From))
		default:
			line = fmt.Sprintf("      ~ %s = %s -> %s", c.Path, show(c.From), show(c.To))
		}
		// Continuation lines start under the value, or further left when
		// the path is so long that little room would be left.
		indent := len("      ~ ") + len(c.Path) + len(" = ")
		if indent > width/2 {
			indent = 10
		}
		fmt.Fprintln(w, jsondiff.Wrap(line, indent, width))
	}
}

// renderPlanned prints the outputs a resource that changes will keep or
// take that are known before apply (its adapter planned them): why what
// reads them is not a knock-on.
func renderPlanned(w io.Writer, s *Step, width int) {
	ptrs := make([]string, 0, len(s.Planned))
	for p := range s.Planned {
		ptrs = append(ptrs, p)
	}
	sort.Strings(ptrs)
	for _, p := range ptrs {
		line := fmt.Sprintf("      = %s = %s (output known before apply)", p, jsondiff.Text(s.Planned[p]))
		fmt.Fprintln(w, jsondiff.Wrap(line, 10, width))
	}
}

// show renders a value compactly and whole; strings still holding ${...}
// are only known after apply. A lone reference is shown bare; a template
// with text around it is quoted like any string, so that a newline in it
// does not break the plan's line (a lone ")" on the next one).
func show(v any) string {
	if s, ok := v.(string); ok && strings.Contains(s, "${") && !strings.Contains(s, "$${") {
		if strings.HasPrefix(s, "${") && strings.Index(s, "}") == len(s)-1 {
			return fmt.Sprintf("(known after apply: %s)", s)
		}
		return fmt.Sprintf("(known after apply: %s)", jsondiff.Text(s))
	}
	return jsondiff.Text(v)
}
