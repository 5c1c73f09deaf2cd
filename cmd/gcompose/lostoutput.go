package main

import (
	"errors"
	"io"
	"sync/atomic"
	"syscall"
)

// lostOutput is standard output or error as the process holds it. Once a
// write finds the pipe's reader gone (EPIPE: `gcompose deploy | tee log`
// and Ctrl-C stops tee too, or `| head` has read enough), the run is told
// (lost, which stops it as a first interrupt does) and later writes are
// dropped: nobody reads them, and an error from every progress line would
// only bury the one that matters. main asks for SIGPIPE, so that such a
// write returns EPIPE instead of killing the process mid-action with its
// operations left pending.
type lostOutput struct {
	w    io.Writer
	lost func()
	gone atomic.Bool
}

func (l *lostOutput) Write(p []byte) (int, error) {
	if l.gone.Load() {
		return len(p), nil
	}
	n, err := l.w.Write(p)
	if err != nil && errors.Is(err, syscall.EPIPE) {
		if l.gone.CompareAndSwap(false, true) {
			// Not inline: the write may come from the interrupt's own
			// report, which holds the interrupts' lock.
			go l.lost()
		}
		return len(p), nil
	}
	return n, err
}

// Unwrap lets the progress renderer find the terminal underneath.
func (l *lostOutput) Unwrap() io.Writer { return l.w }
