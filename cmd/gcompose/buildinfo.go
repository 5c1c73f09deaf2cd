package main

import "runtime/debug"

// buildCommit is the commit set by `make build` (-X main.commit), or else
// the one the Go toolchain recorded (go build in a git checkout: vcs.revision,
// "-dirty" when the tree had changes), or "unknown".
func buildCommit() string {
	if commit != "unknown" && commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
