// Package progress renders the engine's apply events for people (a terminal
// or plain lines) and for machines (one JSON object per line, docs/events.md).
package progress

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/internal/jsonout"
)

// Version of the JSON event stream (the "v" member of every object). It
// changes only when a change would be misread by an existing consumer;
// adding a member does not change it.
const Version = 1

// Mode is how progress is shown.
type Mode string

const (
	TTY   Mode = "tty"   // colored lines with elapsed times, heartbeats on long steps
	Plain Mode = "plain" // one line per event, no color, heartbeats: for logs and pipes
	JSON  Mode = "json"  // one JSON object per line (docs/events.md)
	Quiet Mode = "quiet" // nothing
)

// ParseMode accepts tty, plain, json and quiet.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case TTY, Plain, JSON, Quiet:
		return m, nil
	}
	return "", fmt.Errorf("--progress %q: want tty, plain, json or quiet", s)
}

// Level of an event.
type Level string

const (
	Info  Level = "info"
	Warn  Level = "warn"
	Error Level = "error"
)

// Options of a Renderer.
type Options struct {
	Mode Mode
	// Color enables ANSI colors in TTY mode (off when NO_COLOR is set).
	Color bool
	// Heartbeat is how often a still-running step is reported (default 10 s;
	// negative: never).
	Heartbeat time.Duration
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
	// Live keeps a status line at the bottom in TTY mode (the running
	// actions and their elapsed times), redrawn in place. Only for a real
	// terminal: it uses carriage returns and erase-line codes.
	Live bool
}

// Renderer receives events from the engine (Observe is safe for concurrent
// use) and writes them to one writer.
type Renderer struct {
	mu     sync.Mutex
	w      io.Writer
	opt    Options
	start  time.Time
	ops    map[string]plan.Op
	active map[string]*step
	// skipped resources (a dependency failed), for the summary.
	skipped map[string]bool
	stop    chan struct{}
	done    chan struct{}
	// shown is whether the live status line is on screen.
	shown bool
	// interrupted: the status line says the run waits for what runs.
	interrupted bool
}

// step is a resource with an action running.
type step struct {
	action string
	since  time.Time
	beats  int
}

// New returns a renderer; call Close when the run ends.
func New(w io.Writer, opt Options) *Renderer {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Heartbeat == 0 {
		opt.Heartbeat = 10 * time.Second
	}
	if opt.Mode == JSON || opt.Mode == Quiet {
		opt.Color = false
	}
	r := &Renderer{w: w, opt: opt, start: opt.Now(), ops: map[string]plan.Op{}, active: map[string]*step{}, skipped: map[string]bool{}}
	if opt.Heartbeat > 0 && opt.Mode != Quiet {
		r.stop, r.done = make(chan struct{}), make(chan struct{})
		go r.beat()
	}
	return r
}

// DefaultMode is tty when w is a terminal, else plain.
func DefaultMode(w io.Writer) Mode {
	if IsTerminal(w) {
		return TTY
	}
	return Plain
}

// IsTerminal reports whether w is a terminal: an *os.File, or a writer that
// wraps one and says so with an Unwrap() io.Writer method (the redacting
// writers do). A character device is not enough: /dev/null is one.
func IsTerminal(w io.Writer) bool {
	f := fileOf(w)
	return f != nil && term.IsTerminal(int(f.Fd()))
}

// InputIsTerminal reports whether r is a terminal a person types on.
func InputIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Width is the width of the terminal w writes to, 0 when w is no terminal.
func Width(w io.Writer) int {
	f := fileOf(w)
	if f == nil {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// fileOf finds the *os.File under w's Unwrap chain, nil if there is none.
func fileOf(w io.Writer) *os.File {
	for i := 0; i < 8 && w != nil; i++ {
		if f, ok := w.(*os.File); ok {
			return f
		}
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// ColorAllowed is false when the NO_COLOR environment variable is set to
// anything non-empty (https://no-color.org).
func ColorAllowed(getenv func(string) string) bool { return getenv("NO_COLOR") == "" }

// SetPlan tells the renderer what each resource's op is, so heartbeats say
// "still creating" rather than "still running".
func (r *Renderer) SetPlan(p *plan.Plan) {
	if p == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range p.Steps {
		r.ops[s.Resource] = s.Op
	}
}

// Close stops the heartbeat and erases the live status line.
func (r *Renderer) Close() {
	if r.stop != nil {
		close(r.stop)
		<-r.done
		r.stop = nil
	}
	r.mu.Lock()
	r.clearStatus()
	r.mu.Unlock()
}

// Event is one line of the JSON stream.
type Event struct {
	V          int       `json:"v"`
	Type       string    `json:"type"` // "event"
	Time       time.Time `json:"time"`
	Level      Level     `json:"level"`
	Resource   string    `json:"resource,omitempty"`
	Phase      string    `json:"phase"`
	Message    string    `json:"message,omitempty"`
	DurationMS *int64    `json:"duration_ms,omitempty"`
	Output     string    `json:"output,omitempty"`
}

func levelOf(p apply.Phase) Level {
	switch p {
	case apply.PhaseFailed:
		return Error
	case apply.PhaseSkipped, apply.PhaseSwept, apply.PhaseInterrupted:
		return Warn
	}
	return Info
}

// Observe renders one engine event.
func (r *Renderer) Observe(ev apply.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Time.IsZero() {
		ev.Time = r.opt.Now()
	}
	switch ev.Phase {
	case apply.PhaseAction:
		r.active[ev.Resource] = &step{action: ev.Message, since: ev.Time}
	case apply.PhaseActionDone, apply.PhaseDone, apply.PhaseFailed, apply.PhaseVerify, apply.PhaseInterrupted:
		delete(r.active, ev.Resource)
	case apply.PhaseSkipped:
		delete(r.active, ev.Resource)
		r.skipped[ev.Resource] = true
	}
	if ev.Resource == "" && (r.opt.Mode == Plain || r.opt.Mode == TTY) {
		// About the run, not one resource (what a sweep found): a line
		// of its own, like a note.
		r.clearStatus()
		fmt.Fprintf(r.w, "%s: %s\n", ev.Phase, ev.Message)
		r.drawStatus(ev.Time)
		return
	}
	switch r.opt.Mode {
	case JSON:
		out := Event{V: Version, Type: "event", Time: ev.Time.UTC(), Level: levelOf(ev.Phase), Resource: ev.Resource,
			Phase: string(ev.Phase), Message: ev.Message, Output: ev.Output}
		if ev.Duration > 0 {
			ms := ev.Duration.Milliseconds()
			out.DurationMS = &ms
		}
		r.writeJSON(out)
	case Plain:
		msg := ev.Message
		if ev.Duration > 0 {
			msg += fmt.Sprintf(" [%s]", round(ev.Duration))
		}
		fmt.Fprintln(r.w, strings.TrimSpace(fmt.Sprintf("%s: %s %s", ev.Resource, ev.Phase, strings.TrimSpace(msg))))
		r.writeOutput(ev)
	case TTY:
		r.clearStatus()
		elapsed := ev.Time.Sub(r.start)
		line := fmt.Sprintf("%s %s %s", r.paint(dim, fmt.Sprintf("[%6s]", round1(elapsed))), r.paint(bold, ev.Resource), r.paint(phaseColor(ev.Phase), string(ev.Phase)))
		if ev.Message != "" {
			line += " " + ev.Message
		}
		if ev.Duration > 0 {
			line += " " + r.paint(dim, "("+round(ev.Duration).String()+")")
		}
		fmt.Fprintln(r.w, line)
		r.writeOutput(ev)
		r.drawStatus(ev.Time)
	}
}

// Running names the actions under way and for how long, sorted: "resources.a
// (creating, 12.3s)".
func (r *Renderer) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.opt.Now()
	names := make([]string, 0, len(r.active))
	for n := range r.active {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, fmt.Sprintf("%s (%s, %s)", n, verb(r.ops[n]), round1(now.Sub(r.active[n].since))))
	}
	return out
}

// Interrupt reports a stage of an interrupt (a "interrupt" event, level
// warn); from then on the live status line says what is waited for.
func (r *Renderer) Interrupt(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.interrupted = true
	switch r.opt.Mode {
	case JSON:
		r.writeJSON(Event{V: Version, Type: "event", Time: r.opt.Now().UTC(), Level: Warn, Phase: "interrupt", Message: msg})
	case Plain, TTY:
		r.clearStatus()
		fmt.Fprintf(r.w, "%s\n", r.paint(yellow, msg))
		r.drawStatus(r.opt.Now())
	}
}

// Note renders a message that is not about one resource (a lock taken over,
// leftovers removed).
func (r *Renderer) Note(level Level, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.opt.Mode {
	case JSON:
		r.writeJSON(Event{V: Version, Type: "event", Time: r.opt.Now().UTC(), Level: level, Phase: "note", Message: msg})
	case Plain, TTY:
		r.clearStatus()
		fmt.Fprintf(r.w, "note: %s\n", msg)
		r.drawStatus(r.opt.Now())
	}
}

func (r *Renderer) writeOutput(ev apply.Event) {
	if ev.Output == "" {
		return
	}
	for _, l := range strings.Split(strings.TrimRight(ev.Output, "\n"), "\n") {
		fmt.Fprintf(r.w, "%s: | %s\n", ev.Resource, l)
	}
}

// writeJSON writes v as one line, text as typed ("a > b &", not
// "a \u003e b \u0026").
func (r *Renderer) writeJSON(v any) {
	_ = jsonout.Line(r.w, v)
}

func (r *Renderer) beat() {
	defer close(r.done)
	t := time.NewTicker(r.opt.Heartbeat / 10)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.Tick()
		}
	}
}

// Tick writes a heartbeat line for every step running longer than the next
// multiple of the heartbeat interval; the ticker calls it, tests call it with
// a fake clock.
func (r *Renderer) Tick() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.opt.Mode == Quiet {
		return
	}
	now := r.opt.Now()
	names := make([]string, 0, len(r.active))
	for n := range r.active {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := r.active[n]
		el := now.Sub(s.since)
		beats := int(el / r.opt.Heartbeat)
		if beats <= s.beats {
			continue
		}
		s.beats = beats
		el = time.Duration(beats) * r.opt.Heartbeat
		msg := fmt.Sprintf("still %s... %s", verb(r.ops[n]), el)
		switch r.opt.Mode {
		case JSON:
			ms := el.Milliseconds()
			r.writeJSON(Event{V: Version, Type: "event", Time: now.UTC(), Level: Info, Resource: n, Phase: "heartbeat", Message: msg, DurationMS: &ms})
		case TTY:
			r.clearStatus()
			fmt.Fprintf(r.w, "%s %s %s\n", r.paint(dim, fmt.Sprintf("[%6s]", round1(now.Sub(r.start)))), r.paint(bold, n), r.paint(yellow, msg))
		default:
			fmt.Fprintf(r.w, "%s: %s\n", n, msg)
		}
	}
	if r.opt.Mode == TTY {
		r.drawStatus(now)
	}
}

// drawStatus redraws the live status line: what runs, for how long.
func (r *Renderer) drawStatus(now time.Time) {
	if !r.opt.Live || r.opt.Mode != TTY {
		return
	}
	r.clearStatus()
	if len(r.active) == 0 {
		return
	}
	names := make([]string, 0, len(r.active))
	for n := range r.active {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %s %s", n, verb(r.ops[n]), round1(now.Sub(r.active[n].since))))
	}
	what := "running"
	if r.interrupted {
		what = "to finish after the interrupt"
	}
	line := fmt.Sprintf("[%6s] %d %s: %s", round1(now.Sub(r.start)), len(names), what, strings.Join(parts, ", "))
	if len(line) > 160 {
		line = line[:157] + "..."
	}
	fmt.Fprint(r.w, r.paint(dim, line))
	r.shown = true
}

// clearStatus erases the live status line before a line is printed.
func (r *Renderer) clearStatus() {
	if r.shown {
		fmt.Fprint(r.w, "\r\x1b[K")
		r.shown = false
	}
}

func verb(op plan.Op) string {
	switch op {
	case plan.Create:
		return "creating"
	case plan.Update:
		return "updating"
	case plan.Rebuild:
		return "rebuilding"
	case plan.Delete:
		return "destroying"
	}
	return "working"
}

func round(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func round1(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

const (
	bold   = "1"
	dim    = "2"
	red    = "31"
	green  = "32"
	yellow = "33"
	cyan   = "36"
)

func phaseColor(p apply.Phase) string {
	switch p {
	case apply.PhaseDone:
		return green
	case apply.PhaseFailed:
		return red
	case apply.PhaseSkipped, apply.PhaseWait:
		return yellow
	case apply.PhaseAction, apply.PhaseActionDone:
		return cyan
	}
	return dim
}

func (r *Renderer) paint(code, s string) string {
	if !r.opt.Color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}
