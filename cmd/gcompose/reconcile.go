package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/adapters/golem/lowering"
	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/reconcile"
	"github.com/gcompose/gcompose/core/stateurl"
	"github.com/gcompose/gcompose/internal/jsonout"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

// The command is named after what it does, in the words GAP-16 uses for it
// ("reconciliation of persisted and actual state") and that operators know
// from Kubernetes controllers and Flux: it reconciles, again and again.
func reconcileCommand() *cli.Command {
	flags := append(append(descriptorFlags(), engineFlags()...),
		&cli.DurationFlag{Name: "interval", Value: 30 * time.Second, EnvVars: []string{"GCOMPOSE_RECONCILE_INTERVAL"},
			Usage: "refresh the application every `DURATION` (±20% jitter)"},
		&cli.DurationFlag{Name: "max-backoff", Value: 10 * time.Minute,
			Usage: "after repairs that fail or are refused in a row, wait twice as long each time, up to `DURATION`"},
		&cli.DurationFlag{Name: "leader-ttl", EnvVars: []string{"GCOMPOSE_RECONCILE_LEADER_TTL"}, DefaultText: "--etcd-lock-ttl",
			Usage: "etcd state: a leader that stops renewing its lease loses the leadership after this `DURATION`"},
		&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9464", EnvVars: []string{"GCOMPOSE_RECONCILE_LISTEN"},
			Usage: "serve /metrics (Prometheus) and /healthz on `ADDRESS`; empty: neither"},
		&cli.Float64Flag{Name: "max-glm-per-hour", EnvVars: []string{"GCOMPOSE_MAX_GLM_PER_HOUR"},
			Usage: "rent no replacement that would take the application above `AMOUNT` per hour, in the adapters' currency (overrides budget.per_hour)"},
		&cli.Float64Flag{Name: "max-glm-total", EnvVars: []string{"GCOMPOSE_MAX_GLM_TOTAL"},
			Usage: "rent no replacement whose whole agreement would take what the application spent above `AMOUNT`, in the adapters' currency (overrides budget.total)"},
		&cli.DurationFlag{Name: "grace", Value: 30 * time.Second,
			Usage: "when stopped or no longer leader, let the actions under way finish for up to `DURATION`, then abort them"},
		&cli.IntFlag{Name: "cycles", Usage: "stop after `N` cycles as leader (0: run until stopped); the exit code is 1 when the last one failed, was refused or found the descriptor changed"},
		&cli.BoolFlag{Name: "json", Usage: "write the event stream (repairs and what they do) as JSON lines on stdout (docs/events.md)"},
	)
	for _, f := range flags {
		// In a container the reconciler is configured through its
		// environment (docker-compose.yml's reconcile service).
		switch f := f.(type) {
		case *cli.StringFlag:
			switch f.Name {
			case "app":
				f.EnvVars = []string{"GCOMPOSE_APP"}
			case "network-image", "service-image", "payments-image", "proxy-image":
				f.EnvVars = []string{"GCOMPOSE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))}
			}
		case *cli.DurationFlag:
			if f.Name == "lock-timeout" {
				// A leader that died leaves the state lock to its lease:
				// wait that long rather than a whole interval more.
				f.Value, f.EnvVars = 20*time.Second, []string{"GCOMPOSE_LOCK_TIMEOUT"}
			}
		}
	}
	return &cli.Command{
		Name:      "reconcile",
		Usage:     "keep a deployed application running: refresh it every interval and repair what died, within its budget",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Description: `Runs until stopped (SIGINT/SIGTERM: the actions under way finish for --grace). Every cycle it loads
   the descriptor, refreshes the application, and when a deployed resource drifted (its provider went
   away, its activity died, its agreement was terminated) applies the smallest repair: that resource
   and what depends on it. It repairs nothing while the descriptor differs from the one deployed
   (deploying a change stays a person's act), never creates what was not deployed, never deletes, and
   rents no replacement over the budget (budget: in the descriptor, or the --max-glm-* flags).
   With the state in etcd, several reconcilers elect one leader; the others stand by.
   docs/reconcile.md explains running it in production.`,
		Flags:  flags,
		Action: runReconcile,
	}
}

func runReconcile(c *cli.Context) error {
	backoff, err := reconcileBackoff(c)
	if err != nil {
		return withCode(exitUsage, err)
	}
	budget, err := budgetFlags(c)
	if err != nil {
		return withCode(exitUsage, err)
	}
	if err := checkReconcileFlags(c); err != nil {
		return withCode(exitUsage, err)
	}
	name, _, err := appName(c, true)
	if err != nil {
		return err
	}
	url, err := stateURL(c)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	// A reconciler keeps a deployed application running: with nothing
	// deployed there is nothing to keep, and a typo in --app or --state
	// would otherwise look like a reconciler at work.
	if doc, err := st.Load(c.Context, name); err != nil {
		return withCode(exitError, fmt.Errorf("reading the state of %s at %s: %w", name, stateurl.Redact(url), err))
	} else if len(doc.Resources) == 0 {
		return withCode(exitError, fmt.Errorf("nothing of %s is deployed in the state %s: gcompose reconcile keeps a deployed application running and deploys nothing itself; deploy it first (gcompose deploy)", name, stateurl.Redact(url)))
	}
	if dir, ok := st.LocalDir(); ok {
		release, err := project.HoldReconcilerLock(dir, name)
		if err != nil {
			return withCode(exitError, err)
		}
		defer release()
	}

	logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var stream *eventStream
	if c.Bool("json") {
		stream = newEventStream(c.App.Writer)
		defer stream.Close()
	}
	var observe apply.Observer
	if stream != nil {
		observe = stream.prog.Observe
	} else {
		// The actions of a repair as log lines (the state reads of every
		// refresh would drown them).
		observe = func(ev apply.Event) {
			switch ev.Phase {
			case apply.PhaseState, apply.PhaseWait, apply.PhaseVerify:
				return
			}
			args := []any{"phase", string(ev.Phase)}
			if ev.Resource != "" {
				args = append(args, "resource", ev.Resource)
			}
			if ev.Duration > 0 {
				args = append(args, "duration", ev.Duration.Round(time.Millisecond))
			}
			logger.Info(ev.Message, args...)
		}
	}
	elector, err := st.Elector(name, version, leaderTTL(c))
	if err != nil {
		return withCode(exitError, err)
	}
	if elector == nil {
		logger.Warn("the state is not in etcd: this reconciler leads alone, with no standby to take over when it stops (a second one on this state is refused)", "state", stateurl.Redact(url))
	}
	note := func(level slog.Level) func(string) {
		return func(msg string) {
			logger.Log(context.Background(), level, msg)
			if stream != nil {
				stream.note(level, msg)
			}
		}
	}
	open := func(ctx context.Context) (reconcile.Session, error) {
		p, err := loadProject(c)
		if err != nil {
			return nil, err
		}
		in, err := p.Intent(name)
		if err != nil {
			return nil, err
		}
		// As deploy: the payloads' build: images are built (when their
		// source changed) or found before anything is planned, so that a
		// repair rents an image the devnet has.
		if err := lowering.BuildPayloads(ctx, p.App, note(slog.LevelInfo)); err != nil {
			return nil, err
		}
		sess, err := openSessionOn(c, name, p, st.KeepOpen(), note(slog.LevelInfo), note(slog.LevelWarn))
		if err != nil {
			return nil, err
		}
		return project.ReconcileSession(sess, in, observe), nil
	}
	cfg := reconcile.Config{
		App: name, Open: open, Elector: elector,
		Backoff: backoff, Grace: c.Duration("grace"), Budget: budget, Cycles: c.Int("cycles"),
		Log: logger, Redactor: redactor(c),
	}
	if stream != nil {
		cfg.Events = stream.event
	}
	r, err := reconcile.New(cfg)
	if err != nil {
		return withCode(exitError, err)
	}
	if addr := c.String("listen"); addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return withCode(exitError, fmt.Errorf("--listen %s: %w", addr, err))
		}
		srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		logger.Info("serving /metrics and /healthz", "address", "http://"+ln.Addr().String())
	}
	it := interruptsOf(c.App.Metadata, c.Context)
	defer it.engage(c.Duration("grace"), func(s interruptStage, grace time.Duration) {
		msg := "stopping: nothing new starts; the actions under way finish for up to " + grace.String()
		switch s {
		case stageGraceOver, stageAborting:
			msg = "aborting the actions under way: their operations stay pending for the next leader"
		case stageExitAtOnce:
			msg = "exiting at once"
		}
		logger.Warn(msg)
		if stream != nil {
			stream.prog.Interrupt(msg)
		}
	})()
	if err := r.Run(it.hard, it.soft); err != nil {
		return withCode(exitError, err)
	}
	if c.Int("cycles") > 0 {
		switch s := r.Status(); s.LastOutcome {
		case reconcile.Failed, reconcile.Refused, reconcile.Mismatch:
			return withCode(exitError, fmt.Errorf("the last cycle: %s: %s", s.LastOutcome, s.LastError+strings.Join(s.Mismatches, "; ")))
		}
	}
	return nil
}

// flagSaid names a flag for an error about its value, with its
// environment variable when one is set: a container is configured through
// them (docker-compose.yml's reconcile service).
func flagSaid(c *cli.Context, name string) string {
	for _, f := range c.Command.Flags {
		ev, ok := f.(interface{ GetEnvVars() []string })
		if !ok || !slices.Contains(f.Names(), name) {
			continue
		}
		for _, v := range ev.GetEnvVars() {
			if os.Getenv(v) != "" {
				return "--" + name + " ($" + v + ")"
			}
		}
	}
	return "--" + name
}

// reconcileBackoff is --interval and --max-backoff, checked: a wait of
// zero would spin on yagna, and a maximum below the interval would be
// ignored.
func reconcileBackoff(c *cli.Context) (reconcile.Backoff, error) {
	b := reconcile.Backoff{Interval: c.Duration("interval"), Max: c.Duration("max-backoff"), Jitter: 0.2}
	if b.Interval <= 0 {
		return b, fmt.Errorf("%s %s: must be above 0 (how often the application is refreshed, such as 30s)", flagSaid(c, "interval"), b.Interval)
	}
	switch {
	case !c.IsSet("max-backoff"):
		b.Max = max(b.Max, b.Interval)
	case b.Max < b.Interval:
		return b, fmt.Errorf("--max-backoff %s: must be at least %s %s (failed repairs are retried after the interval, then twice as long each time up to it)", b.Max, flagSaid(c, "interval"), b.Interval)
	}
	return b, nil
}

// budgetFlags are --max-glm-per-hour and --max-glm-total: 0 (unset) leaves
// the descriptor's budget in force; a negative or non-finite cap is a
// typo, not "no cap".
func budgetFlags(c *cli.Context) (reconcile.Budget, error) {
	var b reconcile.Budget
	for _, f := range []struct {
		name string
		to   *float64
	}{{"max-glm-per-hour", &b.PerHour}, {"max-glm-total", &b.Total}} {
		v := c.Float64(f.name)
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return b, fmt.Errorf("%s %v: must be an amount of 0 or more, in the currency the adapters report (0: the descriptor's budget, if any)", flagSaid(c, f.name), v)
		}
		*f.to = v
	}
	return b, nil
}

// checkReconcileFlags refuses the other values that would silently mean
// something else than what was typed.
func checkReconcileFlags(c *cli.Context) error {
	if g := c.Duration("grace"); g <= 0 {
		return fmt.Errorf("--grace %s: must be above 0 (how long the actions under way may finish once stopped; a second Ctrl-C aborts them at once)", g)
	}
	if n := c.Int("cycles"); n < 0 {
		return fmt.Errorf("--cycles %d: must be 0 (run until stopped) or more", n)
	}
	if d := c.Duration("leader-ttl"); d < 0 || (d > 0 && d < time.Second) {
		return fmt.Errorf("%s %s: must be at least 1s (etcd leases last whole seconds), or 0 for --etcd-lock-ttl's", flagSaid(c, "leader-ttl"), d)
	}
	return nil
}

// leaderTTL is --leader-ttl, else the state lock's TTL: a leader and its
// lock then end together. 0: the backend's default lock TTL.
func leaderTTL(c *cli.Context) time.Duration {
	if d := c.Duration("leader-ttl"); d > 0 {
		return d
	}
	if d := c.Duration("etcd-lock-ttl"); d > 0 {
		return d
	}
	if d, err := time.ParseDuration(os.Getenv(stateurl.EnvLockTTL)); err == nil && d > 0 {
		return d
	}
	return 0 // the state backend's
}

// eventStream writes the reconciler's events and the engine's, as JSON
// lines of docs/events.md, to one writer.
type eventStream struct {
	w    io.Writer
	prog *progress.Renderer
}

func newEventStream(w io.Writer) *eventStream {
	sw := syncwriter.Writer{Mu: &sync.Mutex{}, W: w}
	return &eventStream{w: sw, prog: progress.New(sw, progress.Options{Mode: progress.JSON})}
}

func (s *eventStream) Close() { s.prog.Close() }

func levelOf(l slog.Level) progress.Level {
	switch {
	case l >= slog.LevelError:
		return progress.Error
	case l >= slog.LevelWarn:
		return progress.Warn
	}
	return progress.Info
}

func (s *eventStream) event(ev reconcile.Event) {
	out := progress.Event{V: progress.Version, Type: "event", Time: ev.Time.UTC(), Level: levelOf(ev.Level), Resource: ev.Resource, Phase: ev.Phase, Message: ev.Message}
	if ev.Duration > 0 {
		ms := ev.Duration.Milliseconds()
		out.DurationMS = &ms
	}
	_ = jsonout.Line(s.w, out)
}

func (s *eventStream) note(level slog.Level, msg string) { s.prog.Note(levelOf(level), msg) }
