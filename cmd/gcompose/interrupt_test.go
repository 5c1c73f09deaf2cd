package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/apply"
)

// The stages of an interrupt, and a lost output counted as a first
// interrupt that a signal arriving with it (Ctrl-C of `deploy | tee`, in
// either order) does not turn into an abort.
func TestInterruptStages(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    string // s: a signal, o: the output lost
		soft      bool
		hardCause error // nil: hard not ended
		stages    []interruptStage
	}{
		{"one signal", "s", true, nil, []interruptStage{stageStopping}},
		{"two signals abort", "ss", true, apply.ErrAborted, []interruptStage{stageStopping, stageAborting}},
		{"output lost", "o", true, nil, []interruptStage{stageStopping}},
		{"output lost then a signal", "os", true, nil, []interruptStage{stageStopping}},
		{"a signal then output lost", "so", true, nil, []interruptStage{stageStopping}},
		{"output lost, then two signals abort", "oss", true, apply.ErrAborted, []interruptStage{stageStopping, stageAborting}},
		{"output lost twice", "oo", true, nil, []interruptStage{stageStopping}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := newInterrupts(context.Background(), func(int) { t.Fatal("exit") })
			var stages []interruptStage
			release := it.engage(time.Hour, func(s interruptStage, _ time.Duration) { stages = append(stages, s) })
			defer release()
			for _, e := range tc.events {
				if e == 's' {
					it.signal()
				} else {
					it.outputLost()
				}
			}
			if got := it.soft.Err() != nil; got != tc.soft {
				t.Errorf("soft ended %t, want %t", got, tc.soft)
			}
			if cause := context.Cause(it.hard); !errors.Is(cause, tc.hardCause) || (tc.hardCause == nil) != (cause == nil) {
				t.Errorf("hard's cause %v, want %v", cause, tc.hardCause)
			}
			if len(stages) != len(tc.stages) {
				t.Fatalf("stages %v, want %v", stages, tc.stages)
			}
			for i := range stages {
				if stages[i] != tc.stages[i] {
					t.Fatalf("stages %v, want %v", stages, tc.stages)
				}
			}
		})
	}
}

// A run cut short by a signal before the engine listened to it fails with
// whatever the cancellation broke ("context canceled"): that is the
// interrupt (exit 130, interrupted), not an error; an apply failure stays
// a failure; without a signal nothing is rewritten.
func TestCancellationAfterASignalIsTheInterrupt(t *testing.T) {
	canceled := fmt.Errorf("loading state: %w", context.Canceled)
	it := newInterrupts(context.Background(), func(int) { t.Fatal("exit") })
	if err := it.asInterrupted(canceled, nil); err != canceled {
		t.Fatalf("without a signal: %v", err)
	}
	it.signal() // not engaged: cancels at once
	it.signal()
	err := it.asInterrupted(canceled, nil)
	var ie *apply.InterruptedError
	if !errors.As(err, &ie) || !errors.Is(err, apply.ErrInterrupted) || err.Error() != "interrupted: nothing was changed" {
		t.Fatalf("after two signals: %v, want the interrupt", err)
	}
	failed := &apply.FailedError{Outcomes: []*apply.Outcome{{Resource: "r", Err: errors.New("boom")}}}
	if err := it.asInterrupted(failed, nil); err != error(failed) {
		t.Fatalf("an apply failure became %v", err)
	}
}

// The second interrupt's message says what it does when nothing is under
// way, instead of "aborting the actions nothing is under way".
func TestSecondInterruptMessageWithNothingUnderWay(t *testing.T) {
	msg := interruptMessage(stageAborting, time.Minute, nil)
	if strings.Contains(msg, "actions nothing") || !strings.Contains(msg, "no action is under way") {
		t.Fatalf("message %q", msg)
	}
	if msg := interruptMessage(stageAborting, time.Minute, []string{"r (creating, 1s)"}); !strings.Contains(msg, "aborting the actions under way: r (creating, 1s)") {
		t.Fatalf("message %q", msg)
	}
}
