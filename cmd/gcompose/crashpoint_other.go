//go:build !unix

package main

import (
	"fmt"
	"os"
)

// killSelf ends the process without running deferred calls or handlers: on
// Windows os.Process.Kill is TerminateProcess, the nearest to SIGKILL.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	os.Exit(137)
}

// interruptSelf: a process cannot send itself Ctrl-C here, so the SIGINT crash
// point is refused loudly rather than silently skipped (the crash tests run
// on unix only).
func interruptSelf() {
	fmt.Fprintf(os.Stderr, "gcompose: %s=INT needs unix signals\n", crashSignalEnv)
	os.Exit(2)
}
