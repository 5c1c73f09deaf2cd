// Package reconcile keeps a deployed application running without a person:
// a loop that refreshes the application, and when a deployed resource
// drifted (its provider went away, its activity died, its agreement was
// terminated) applies the smallest repair — the drifted resources and
// what depends on them — through the same engine as deploy, with backoff
// and jitter when repairs fail, within a spend budget. Several reconcilers
// of one application elect one leader (Elector, etcd's concurrency
// election); only the leader repairs, and every write goes through the
// state lock, whose fencing refuses a holder that lost it.
//
// What it never does: deploy a descriptor change (the descriptor must be
// the one last deployed, Mismatches, or nothing is repaired), create what
// was never deployed, delete or forget anything, or rent past the budget.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
)

// Session is one cycle's view of the application: its descriptor as
// loaded now and the engine that runs it (the CLI's is core/project's
// Session). Run gets a request whose App, Desired and Outputs are the
// intent's; a session that runs the very project its intent was made from
// (the CLI's) may run that instead.
type Session interface {
	Intent() *Intent
	Run(ctx context.Context, req engine.Request) (*engine.Outcome, error)
	Close() error
}

// Opener loads the descriptor afresh and opens a session, once per cycle:
// a change a person deployed since is then the intent (and one not
// deployed shows as a mismatch).
type Opener func(ctx context.Context) (Session, error)

// Outcome of a cycle.
type Outcome string

const (
	Healthy  Outcome = "healthy"  // nothing drifted
	Repaired Outcome = "repaired" // a repair was applied
	Failed   Outcome = "failed"   // the descriptor, the refresh or the repair failed
	Refused  Outcome = "refused"  // the repair was over the budget, or more than a repair
	Busy     Outcome = "busy"     // someone else held the state lock (a person deploying)
	Mismatch Outcome = "mismatch" // the descriptor is not the one deployed: nothing repaired
	Stopped  Outcome = "stopped"  // cut short: the reconciler stops or no longer leads
)

// Event is one thing a reconciler reports; the CLI writes each to the JSON
// event stream (docs/events.md) and the log.
type Event struct {
	Time     time.Time
	Level    slog.Level
	Phase    string
	Resource string
	Message  string
	Duration time.Duration
}

// Event phases.
const (
	PhaseLeader        = "leader"         // this reconciler leads, or no longer does
	PhaseDrift         = "drift"          // a resource was found drifted (once per drift)
	PhaseRepair        = "repair"         // a repair starts: what drifted, the knock-ons
	PhaseRepaired      = "repaired"       // a repair ended well; Duration is the time to repair
	PhaseRepairFailed  = "repair-failed"  // a repair failed; the next try waits
	PhaseRepairRefused = "repair-refused" // a repair was refused: over the budget, or more than a repair
	PhaseRepairStopped = "repair-stopped" // a repair was cut short: the reconciler stops or no longer leads
	PhaseIntent        = "intent"         // the descriptor is not (or again) the one deployed
	PhaseCycleFailed   = "cycle-failed"   // the descriptor or the refresh failed
)

// Config assembles a Reconciler.
type Config struct {
	App  string
	Open Opener
	// Spender reads what the application spent (metrics, budget.total).
	// Nil: what its adapters report (AdapterSpend).
	Spender Spender
	// Elector elects the leader among reconcilers of the application; nil
	// leads alone.
	Elector Elector
	Backoff Backoff
	// Grace is how long the actions under way may finish once leadership
	// is lost or the reconciler is stopped, before they are aborted (their
	// operations stay pending for the next leader).
	Grace time.Duration
	// Budget caps set by flags; those left unset come from the descriptor.
	Budget  Budget
	Metrics *Metrics
	// Redactor masks secrets in everything served over HTTP (/healthz,
	// /metrics), as in the CLI's output: the run's, which learns each
	// cycle's secrets as the descriptor and the state are loaded. An error
	// or a drift's reason may quote a config. Required.
	Redactor *secret.Redactor
	// Cycles, when above 0, ends Run after that many cycles as leader.
	Cycles int
	// Events receives what the reconciler reports (besides the log).
	Events func(Event)
	// Observer receives the engine's events during repairs.
	Observer apply.Observer
	Log      *slog.Logger
	// Rand returns a number in [0, 1) for the jitter (nil: math/rand/v2).
	Rand func() float64
}

// Reconciler keeps one application running.
type Reconciler struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	status    Status
	firstSeen map[string]time.Time // drifted resource -> when first seen
	failures  int                  // repairs in a row that failed or were refused
	lastAlert string               // the last mismatch or refusal reported
	cycles    int                  // cycles run as leader
	// lastTargets are the targets of the last repair tried.
	lastTargets string
}

// New checks cfg and makes a reconciler.
func New(cfg Config) (*Reconciler, error) {
	if cfg.App == "" {
		return nil, errors.New("reconcile: no application")
	}
	if cfg.Open == nil {
		return nil, errors.New("reconcile: no Opener")
	}
	if cfg.Redactor == nil {
		return nil, errors.New("reconcile: no Redactor: /healthz would show the secrets an error quotes")
	}
	if cfg.Backoff.Interval <= 0 {
		return nil, fmt.Errorf("reconcile: interval %s: must be above 0", cfg.Backoff.Interval)
	}
	if cfg.Backoff.Max < cfg.Backoff.Interval {
		cfg.Backoff.Max = max(cfg.Backoff.Interval, 10*time.Minute)
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.App)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	r := &Reconciler{cfg: cfg, log: log.With("app", cfg.App), firstSeen: map[string]time.Time{}}
	r.status = Status{App: cfg.App, Interval: cfg.Backoff.Interval.String()}
	return r, nil
}

// Metrics are the reconciler's.
func (r *Reconciler) Metrics() *Metrics { return r.cfg.Metrics }

// Result is what one cycle found and did.
type Result struct {
	Outcome    Outcome
	Drifted    []Drifted
	Targets    []string
	KnockOns   []string
	Changes    []string
	Mismatches []string
	Refused    *RefusedError
	Err        error
	// TimeToRepair is, for Repaired, the time since the drift was first seen.
	TimeToRepair time.Duration
}

func (r *Reconciler) emit(ev Event) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	args := []any{"phase", ev.Phase}
	if ev.Resource != "" {
		args = append(args, "resource", ev.Resource)
	}
	if ev.Duration > 0 {
		args = append(args, "duration", ev.Duration.Round(time.Millisecond))
	}
	r.log.Log(context.Background(), ev.Level, ev.Message, args...)
	if r.cfg.Events != nil {
		r.cfg.Events(ev)
	}
}

// Cycle runs one cycle as leader: load the descriptor, refresh, and
// repair what drifted. stop, once done, lets actions under way finish and
// starts nothing new; cancelling ctx aborts them. Exported so that a test
// can run any number of cycles in process.
func (r *Reconciler) Cycle(ctx, stop context.Context) (res Result) {
	m := r.cfg.Metrics
	r.mu.Lock()
	r.status.InCycle, r.status.CycleStarted = true, time.Now().UTC()
	r.mu.Unlock()
	defer func() {
		m.cycles.WithLabelValues(string(res.Outcome)).Inc()
		m.lastCycle.SetToCurrentTime()
		r.mu.Lock()
		defer r.mu.Unlock()
		now := time.Now().UTC()
		r.status.InCycle = false
		r.status.LastCycle = &now
		r.status.LastOutcome = res.Outcome
		r.status.LastError = ""
		if res.Err != nil {
			r.status.LastError = res.Err.Error()
		} else if res.Refused != nil {
			r.status.LastError = res.Refused.Error()
		}
		r.status.Drifted = res.Drifted
		r.status.Mismatches = res.Mismatches
		r.status.ConsecutiveFailures = r.failures
	}()

	sess, err := r.cfg.Open(ctx)
	if err != nil {
		m.failures.WithLabelValues("load").Inc()
		res.Outcome, res.Err = Failed, fmt.Errorf("loading the descriptor: %w", err)
		r.emit(Event{Level: slog.LevelError, Phase: PhaseCycleFailed, Message: res.Err.Error()})
		return res
	}
	defer sess.Close()
	in := sess.Intent()
	budget := r.cfg.Budget.Or(in.Budget)
	m.setBudget(budget)

	out, err := sess.Run(ctx, engine.Request{App: r.cfg.App, Mode: plan.Refresh, PlanOnly: true, Stop: stop})
	if errors.Is(err, state.ErrLocked) {
		res.Outcome, res.Err = Busy, err
		r.log.Info("the state is locked by someone else: next cycle", "err", err)
		return res
	}
	if stopping(stop, err) {
		res.Outcome, res.Err = Stopped, err
		return res
	}
	if err != nil || out == nil || out.Plan == nil || out.Plan.Prior == nil {
		if err == nil {
			err = errors.New("the refresh made no plan")
		}
		m.failures.WithLabelValues("refresh").Inc()
		res.Outcome, res.Err = Failed, fmt.Errorf("refresh: %w", err)
		r.emit(Event{Level: slog.LevelError, Phase: PhaseCycleFailed, Message: res.Err.Error()})
		return res
	}
	refresh, doc := out.Plan, out.Plan.Prior
	mismatches, behind := Compare(in, doc)
	res.Drifted = withDrift(driftOf(refresh), behind)
	m.setResources(doc, res.Drifted)
	m.setPerHour(priceOf(rates(refresh)))
	spent := r.spender(doc, refresh)
	if sp, err := spent(ctx); err == nil {
		m.setSpend(sp)
	}
	r.noteDrift(res.Drifted)

	if res.Mismatches = mismatches; len(res.Mismatches) > 0 {
		m.mismatch.Set(1)
		res.Outcome = Mismatch
		msg := strings.Join(res.Mismatches, "; ")
		if len(doc.Resources) > 0 {
			msg = "the descriptor is not the one deployed, so nothing is repaired until a person deploys it (gcompose deploy) or puts the deployed one back: " + msg
		}
		if len(res.Drifted) > 0 {
			msg += "; drifted meanwhile: " + joinDrift(res.Drifted)
		}
		r.alert(Event{Level: slog.LevelWarn, Phase: PhaseIntent, Message: msg})
		return res
	}
	m.mismatch.Set(0)
	if strings.HasPrefix(r.lastAlertOf(), PhaseIntent+":") {
		r.lastAlertSet("")
		r.emit(Event{Level: slog.LevelInfo, Phase: PhaseIntent, Message: "the descriptor is the one deployed again: repairs resume"})
	}
	if len(res.Drifted) == 0 {
		res.Outcome = Healthy
		r.setFailures(0)
		return res
	}

	res.Targets, res.KnockOns = targetsOf(res.Drifted, doc)
	msg := "repairing " + joinDrift(res.Drifted)
	if len(res.KnockOns) > 0 {
		msg += "; knock-ons: " + strings.Join(res.KnockOns, ", ")
	}
	// A repair refused last time and tried again (backing off) is not news
	// until it is no longer refused.
	refusedBefore := strings.HasPrefix(r.lastAlertOf(), PhaseRepairRefused+":") && r.lastTargetsOf() == strings.Join(res.Targets, ",")
	if refusedBefore {
		r.log.Debug(msg, "phase", PhaseRepair, "repeated", true)
	} else {
		r.emit(Event{Level: slog.LevelInfo, Phase: PhaseRepair, Message: msg})
	}
	r.mu.Lock()
	r.lastTargets = strings.Join(res.Targets, ",")
	r.mu.Unlock()
	confirm := func(p *plan.Plan) (bool, error) {
		prior := p.Prior
		if prior == nil {
			prior = doc
		}
		if err := checkRepair(p, prior, res.Targets); err != nil {
			res.Refused = err.(*RefusedError)
			return false, nil
		}
		if err := checkBudget(ctx, budget, refresh, p, spent); err != nil {
			res.Refused = err.(*RefusedError)
			return false, nil
		}
		res.Changes = changesOf(p)
		return true, nil
	}
	began := time.Now()
	rout, err := sess.Run(ctx, engine.Request{App: r.cfg.App, Mode: plan.Deploy, Desired: in.Desired, Outputs: in.Outputs,
		Targets: res.Targets, Confirm: confirm, Stop: stop})
	if err != nil {
		err = withCauses(err, rout)
	} else if rout != nil && rout.Result != nil {
		// What was done, not what the plan allowed: a knock-on planned as
		// a possible rebuild often turns out unchanged.
		res.Changes = changedBy(rout.Result)
	}
	switch {
	case res.Refused != nil:
		res.Outcome = Refused
		m.repairs.WithLabelValues("refused").Inc()
		r.setFailures(r.failures + 1)
		r.alert(Event{Level: slog.LevelWarn, Phase: PhaseRepairRefused, Message: res.Refused.Reason})
	case errors.Is(err, state.ErrLocked):
		res.Outcome, res.Err = Busy, err
		r.log.Info("the state was locked by someone else before the repair: next cycle", "err", err)
	case stopping(stop, err):
		// Cut short because this reconciler stops or lost its leadership,
		// before or after part of it was done: a handover, not a failure
		// to back off from. What was cut short is a pending operation in
		// the state, which the next leader's (or run's) refresh resolves.
		res.Outcome, res.Err = Stopped, err
		r.emit(Event{Level: slog.LevelWarn, Phase: PhaseRepairStopped, Duration: time.Since(began),
			Message: "repair cut short because this reconciler stops or no longer leads; the next leader or run finishes it: " + err.Error()})
	case err != nil:
		res.Outcome, res.Err = Failed, err
		m.repairs.WithLabelValues("failed").Inc()
		m.failures.WithLabelValues("repair").Inc()
		r.setFailures(r.failures + 1)
		next := r.cfg.Backoff.Wait(r.failures, 0.5)
		r.emit(Event{Level: slog.LevelError, Phase: PhaseRepairFailed, Duration: time.Since(began),
			Message: fmt.Sprintf("%v (repair %d in a row to fail; next try in about %s)", err, r.failures, roughly(next))})
	case len(res.Changes) == 0:
		// The adapters found nothing to change after all (the drift was
		// outputs only, recorded now, or it healed meanwhile).
		res.Outcome = Healthy
		r.setFailures(0)
		r.forget(res.Drifted)
	default:
		res.Outcome = Repaired
		m.repairs.WithLabelValues("repaired").Inc()
		res.TimeToRepair = r.timeToRepair(res.Drifted)
		m.timeToRepair.Observe(res.TimeToRepair.Seconds())
		r.setFailures(0)
		r.forget(res.Drifted)
		r.lastAlertSet("")
		r.emit(Event{Level: slog.LevelInfo, Phase: PhaseRepaired, Duration: res.TimeToRepair,
			Message: fmt.Sprintf("repaired %s: %s (in %s, %s since the drift was seen)", joinDrift(res.Drifted), strings.Join(res.Changes, ", "),
				time.Since(began).Round(time.Millisecond), res.TimeToRepair.Round(time.Millisecond))})
	}
	return res
}

// withCauses adds to a run's error what each failed resource's error was,
// when the error does not say it (an interrupted run only counts them).
func withCauses(err error, out *engine.Outcome) error {
	if out == nil || out.Result == nil {
		return err
	}
	var causes []string
	for _, o := range out.Result.Failed() {
		if o.Skipped || o.Err == nil || errors.Is(o.Err, apply.ErrInterrupted) || errors.Is(err, o.Err) {
			continue
		}
		causes = append(causes, plan.Named(o.Resource, o.Err).Error())
	}
	if len(causes) == 0 {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.Join(causes, "; "))
}

// stopping reports an error caused by stop: the run was interrupted
// because the reconciler stops or lost its leadership.
func stopping(stop context.Context, err error) bool {
	return err != nil && stop.Err() != nil && errors.Is(err, apply.ErrInterrupted)
}

// changedBy names what a run changed: "rebuild services.db", sorted.
func changedBy(r *apply.Result) []string {
	var out []string
	for _, name := range sortedNames(r.Outcomes) {
		if o := r.Outcomes[name]; o.Changed && o.Err == nil {
			out = append(out, o.Op.Verb()+" "+name)
		}
	}
	return out
}

// roughly rounds a wait for people: to the second from 10s up.
func roughly(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// spender reads what the application spent, once per cycle at most.
func (r *Reconciler) spender(doc *state.Document, refresh *plan.Plan) func(context.Context) (*Spend, error) {
	var once sync.Once
	var sp *Spend
	var err error
	return func(ctx context.Context) (*Spend, error) {
		once.Do(func() {
			if r.cfg.Spender == nil {
				sp, err = AdapterSpend(doc, refresh)
			} else {
				sp, err = r.cfg.Spender.Spent(ctx, doc, refresh)
			}
			if err != nil {
				r.cfg.Metrics.failures.WithLabelValues("spend").Inc()
				r.log.Warn("reading what the application spent", "err", err)
			}
		})
		return sp, err
	}
}

// noteDrift remembers when each drift was first seen and reports new ones.
func (r *Reconciler) noteDrift(drifted []Drifted) {
	r.mu.Lock()
	var fresh []Drifted
	seen := map[string]bool{}
	for _, d := range drifted {
		seen[d.Resource] = true
		if _, ok := r.firstSeen[d.Resource]; !ok {
			r.firstSeen[d.Resource] = time.Now()
			fresh = append(fresh, d)
		}
	}
	// A drift that healed by itself is forgotten.
	for n := range r.firstSeen {
		if !seen[n] {
			delete(r.firstSeen, n)
		}
	}
	r.mu.Unlock()
	for _, d := range fresh {
		r.emit(Event{Level: slog.LevelWarn, Phase: PhaseDrift, Resource: d.Resource, Message: d.Drift + ": " + d.Reason})
	}
}

func (r *Reconciler) forget(drifted []Drifted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range drifted {
		delete(r.firstSeen, d.Resource)
	}
}

func (r *Reconciler) timeToRepair(drifted []Drifted) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d time.Duration
	for _, x := range drifted {
		if t, ok := r.firstSeen[x.Resource]; ok {
			d = max(d, time.Since(t))
		}
	}
	return d
}

func (r *Reconciler) setFailures(n int) {
	r.mu.Lock()
	r.failures = n
	r.mu.Unlock()
}

// alert emits an event once per distinct message in a row: a refusal or
// a mismatch repeated every cycle is one event and a log line per cycle at
// debug level.
func (r *Reconciler) alert(ev Event) {
	key := ev.Phase + ":" + ev.Message
	if r.lastAlertOf() == key {
		r.log.Debug(ev.Message, "phase", ev.Phase, "repeated", true)
		return
	}
	r.lastAlertSet(key)
	r.emit(ev)
}

func (r *Reconciler) lastAlertOf() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastAlert
}

func (r *Reconciler) lastTargetsOf() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastTargets
}

func (r *Reconciler) lastAlertSet(s string) {
	r.mu.Lock()
	r.lastAlert = s
	r.mu.Unlock()
}

func joinDrift(d []Drifted) string {
	parts := make([]string, len(d))
	for i, x := range d {
		parts[i] = x.String()
	}
	return strings.Join(parts, ", ")
}

// Run leads or stands by until stop is done (or ctx ends): it campaigns to
// lead, and while it leads runs a cycle, waits (Backoff), and again. When
// leadership is lost, or stop is done, the actions under way may finish
// for Grace, then are aborted.
func (r *Reconciler) Run(ctx, stop context.Context) error {
	el := r.cfg.Elector
	if el == nil {
		el = alone{}
	}
	campaigns := 0
	for ctx.Err() == nil && stop.Err() == nil && !r.enough() {
		term, err := el.Campaign(stop)
		if err != nil {
			if stop.Err() != nil || ctx.Err() != nil {
				return nil
			}
			campaigns++
			r.setStatus(func(s *Status) { s.CampaignError = err.Error() })
			wait := r.cfg.Backoff.Wait(min(campaigns, 6), r.cfg.Rand())
			r.log.Warn("campaigning for leadership failed", "err", err, "retry_in", wait.Round(time.Millisecond))
			if !sleep(stop, wait) {
				return nil
			}
			continue
		}
		campaigns = 0
		r.setStatus(func(s *Status) { s.CampaignError = "" })
		r.lead(ctx, stop, term)
	}
	return nil
}

// lead runs cycles while term lasts.
func (r *Reconciler) lead(ctx, stop context.Context, term Term) {
	m := r.cfg.Metrics
	m.leader.Set(1)
	since := time.Now().UTC()
	r.setStatus(func(s *Status) { s.Leader, s.LeaderSince = true, &since })
	r.emit(Event{Level: slog.LevelInfo, Phase: PhaseLeader, Message: "leading: this reconciler repairs " + r.cfg.App + " (" + term.Describe() + ")"})
	// A new leader sees every drift afresh.
	r.mu.Lock()
	r.firstSeen = map[string]time.Time{}
	r.mu.Unlock()

	soft, cancelSoft := context.WithCancel(stop)
	defer cancelSoft()
	hard, cancelHard := context.WithCancelCause(ctx)
	defer cancelHard(nil)
	lost := make(chan struct{})
	go func() {
		select {
		case <-term.Done():
			close(lost)
		case <-soft.Done():
		}
		cancelSoft()
		// What is under way may finish for Grace: its writes are fenced by
		// the state lock, which it still holds if only the election lease
		// was lost.
		t := time.NewTimer(r.cfg.Grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancelHard(apply.ErrAborted)
		case <-hard.Done():
		}
	}()
	for soft.Err() == nil {
		r.Cycle(hard, soft)
		r.mu.Lock()
		failures := r.failures
		r.cycles++
		r.mu.Unlock()
		if r.enough() || !sleep(soft, r.cfg.Backoff.Wait(failures, r.cfg.Rand())) {
			break
		}
	}
	m.leader.Set(0)
	r.setStatus(func(s *Status) { s.Leader, s.LeaderSince = false, nil })
	why, level := "stopped", slog.LevelInfo
	select {
	case <-lost:
		why, level = "its leadership ended ("+term.Describe()+")", slog.LevelWarn
	default:
	}
	r.emit(Event{Level: level, Phase: PhaseLeader, Message: "no longer leading: " + why})
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := term.Resign(rctx); err != nil {
		r.log.Debug("resigning", "err", err)
	}
}

// enough reports whether Config.Cycles cycles have run.
func (r *Reconciler) enough() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cfg.Cycles > 0 && r.cycles >= r.cfg.Cycles
}

// sleep waits d unless ctx ends first (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
