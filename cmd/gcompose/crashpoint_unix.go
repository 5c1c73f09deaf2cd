//go:build unix

package main

import (
	"os"
	"syscall"
)

// killSelf ends the process as SIGKILL does: no deferred call, no handler,
// nothing flushed.
func killSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// interruptSelf delivers SIGINT to this process, as Ctrl-C in a terminal does.
func interruptSelf() { _ = syscall.Kill(os.Getpid(), syscall.SIGINT) }
