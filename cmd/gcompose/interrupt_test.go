package main

import (
	"context"
	"errors"
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
