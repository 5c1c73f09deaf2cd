package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/apply"
)

// exitInterrupted is the exit code of a run ended by SIGINT or SIGTERM
// (128 + SIGINT, as shells report it).
const exitInterrupted = 130

// defaultInterruptGrace bounds how long a first interrupt waits for the
// actions under way. Long enough for what real adapters do in one action
// (a Golem service: an agreement, an activity, an image download; usually
// one to three minutes), short enough that a stuck adapter does not hold
// the terminal for the 10-minute call timeout; a second Ctrl-C aborts at
// any time.
const defaultInterruptGrace = 5 * time.Minute

// interruptsKey is where the process's interrupts live in cli.App.Metadata.
const interruptsKey = "gcompose.interrupts"

// interrupts turns SIGINT/SIGTERM into the stages of a Terraform-style
// interrupt. The first signal stops a run from starting anything new (soft)
// while what is under way finishes, for up to the grace period; the second,
// or the end of the grace period, cuts what is under way short (hard,
// cause apply.ErrAborted); a third exits at once. A command that does not
// run the engine (nothing listens to soft) is cancelled by the first.
type interrupts struct {
	soft     context.Context
	stopSoft context.CancelFunc
	hard     context.Context
	stopHard context.CancelCauseFunc
	exit     func(code int)

	mu      sync.Mutex
	n       int  // signals received
	stopped bool // the first stage has begun (a signal or lost output)
	engaged bool
	grace   time.Duration
	timer   *time.Timer
	// say reports each stage to the user (the run's progress renderer).
	say func(stage interruptStage, grace time.Duration)
}

type interruptStage int

const (
	stageStopping   interruptStage = iota // first signal: nothing new starts
	stageGraceOver                        // the grace period is over: aborting
	stageAborting                         // second signal: aborting
	stageExitAtOnce                       // third signal
)

func newInterrupts(parent context.Context, exit func(int)) *interrupts {
	it := &interrupts{grace: defaultInterruptGrace, exit: exit}
	it.hard, it.stopHard = context.WithCancelCause(parent)
	it.soft, it.stopSoft = context.WithCancel(it.hard)
	return it
}

// engage says an engine run listens to soft from now on, with the given
// grace period and reporter; release undoes it.
func (it *interrupts) engage(grace time.Duration, say func(interruptStage, time.Duration)) (release func()) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if grace > 0 {
		it.grace = grace
	}
	it.engaged, it.say = true, say
	return func() {
		it.mu.Lock()
		defer it.mu.Unlock()
		it.engaged, it.say = false, nil
		if it.timer != nil {
			it.timer.Stop()
		}
	}
}

// signal handles one SIGINT or SIGTERM.
func (it *interrupts) signal() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.n++
	switch {
	case it.n == 1 && it.stopped:
		// Already stopping since the output was lost: Ctrl-C of
		// `gcompose deploy | tee log` stops tee too, and which of the two
		// gcompose notices first is chance; it is one interrupt.
	case it.n == 1:
		it.first()
	case it.n == 2:
		if it.hard.Err() == nil {
			it.report(stageAborting)
		}
		it.stopHard(apply.ErrAborted)
	default:
		it.report(stageExitAtOnce)
		it.exit(exitInterrupted)
	}
}

// outputLost handles the loss of standard output or error (the reader of
// the pipe went away): nobody watches the run any more, so it stops as at
// a first interrupt, letting what is under way finish and be recorded,
// instead of dying of SIGPIPE mid-action with operations left pending.
func (it *interrupts) outputLost() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.n == 0 && !it.stopped {
		it.first()
	}
}

// first is the first stage: stop starting anything new. it.mu is held.
func (it *interrupts) first() {
	it.stopped = true
	switch {
	case it.engaged:
		it.stopSoft()
		it.report(stageStopping)
		grace := it.grace
		it.timer = time.AfterFunc(grace, func() {
			it.mu.Lock()
			defer it.mu.Unlock()
			if it.hard.Err() == nil {
				it.report(stageGraceOver)
				it.stopHard(fmt.Errorf("%w: the %s grace period is over", apply.ErrAborted, grace))
			}
		})
	default:
		it.stopSoft()
		it.stopHard(apply.ErrInterrupted)
	}
}

// signalled says whether a signal (or a lost output) stopped the run.
func (it *interrupts) signalled() bool {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.stopped || it.n > 0
}

// aborted says whether the run was cut short (a second signal, or the
// grace period over).
func (it *interrupts) aborted() bool {
	return errors.Is(context.Cause(it.hard), apply.ErrAborted)
}

// asInterrupted is err as the interrupt it is: a run stopped by a signal
// fails with whatever the cancellation broke ("context canceled" from a
// call cut short before the engine listened to the interrupt), which is
// the interrupt, not an error; res is what the run applied, if anything.
// An apply failure stays one.
func (it *interrupts) asInterrupted(err error, res *apply.Result) error {
	if err == nil || !it.signalled() || errors.Is(err, apply.ErrInterrupted) || apply.IsFailed(err) {
		return err
	}
	if res == nil {
		res = &apply.Result{Outcomes: map[string]*apply.Outcome{}}
	}
	return &apply.InterruptedError{Result: res, Aborted: it.aborted()}
}

func (it *interrupts) report(s interruptStage) {
	if it.say != nil {
		it.say(s, it.grace)
	}
}

// interruptsOf returns the process's interrupts, or ones that no signal
// ever reaches (tests call run directly).
func interruptsOf(meta map[string]any, ctx context.Context) *interrupts {
	if it, ok := meta[interruptsKey].(*interrupts); ok {
		return it
	}
	return newInterrupts(ctx, os.Exit)
}

// interruptMessage says what an interrupt does now, naming what is under
// way.
func interruptMessage(s interruptStage, grace time.Duration, running []string) string {
	under := "nothing is under way"
	if len(running) > 0 {
		under = "under way: " + strings.Join(running, ", ")
	}
	switch s {
	case stageStopping:
		if len(running) == 0 {
			return "Interrupt received: stopping; nothing new starts (" + under + ")"
		}
		return fmt.Sprintf("Interrupt received: nothing new starts; waiting up to %s for the actions %s. "+
			"Press Ctrl-C again to abort them (their operations stay pending; the next deploy or destroy resolves them)", grace, under)
	case stageGraceOver:
		if len(running) == 0 {
			return fmt.Sprintf("The %s grace period is over: stopping now (nothing is under way)", grace)
		}
		return fmt.Sprintf("The %s grace period is over: aborting the actions still %s (their operations stay pending)", grace, under)
	case stageAborting:
		if len(running) == 0 {
			return "Second interrupt: stopping now; no action is under way, so none is cut short. Press Ctrl-C once more to exit at once"
		}
		return "Second interrupt: aborting the actions " + under + " (their operations stay pending; the next deploy or destroy resolves them). Press Ctrl-C once more to exit at once"
	}
	return "Third interrupt: exiting at once"
}
