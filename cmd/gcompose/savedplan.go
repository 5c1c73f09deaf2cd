package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
)

// savedPlanKind marks a file written by plan -out.
const savedPlanKind = "gcompose-plan"

// savedPlanFile is what plan -out writes: the plan (secrets masked: deploy
// takes the configs from the descriptor again, after checking that it
// hashes as the plan's inputs did) and the descriptor files it was made
// from, so that deploy FILE.plan loads the same ones.
type savedPlanFile struct {
	Kind  string   `json:"kind"`
	Files []string `json:"files,omitempty"`
	*plan.Plan
}

// isSavedPlanArg tells a saved plan from a descriptor among positional
// arguments: its name ends in .plan.
func isSavedPlanArg(arg string) bool { return strings.HasSuffix(arg, ".plan") }

// savedPlanArg reads the saved plan named on the command line, if one is:
// it must then be the only positional argument and come without -f.
func savedPlanArg(c *cli.Context) (*savedPlanFile, string, error) {
	args, names := splitPositional(c)
	var path string
	for _, a := range args {
		if isSavedPlanArg(a) {
			path = a
		}
	}
	if path == "" {
		return nil, "", nil
	}
	if len(args) != 1 || len(names) > 0 || len(fileArgs(c)) > 0 || len(c.StringSlice("target")) > 0 || len(c.StringSlice("replace")) > 0 {
		return nil, path, withCode(exitUsage, fmt.Errorf("%s is a saved plan: it names its descriptor files itself; pass it alone, without descriptors, -f, names, --target or --replace (they were given to plan)", path))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, path, withCode(exitError, fmt.Errorf("reading the saved plan: %w", err))
	}
	var sp savedPlanFile
	if err := json.Unmarshal(b, &sp); err != nil {
		return nil, path, withCode(exitError, fmt.Errorf("reading the saved plan %s: not a plan written by gcompose plan -out: %w", path, err))
	}
	if sp.Kind != savedPlanKind || sp.Plan == nil {
		return nil, path, withCode(exitError, fmt.Errorf("%s is not a plan written by gcompose plan -out (kind %q)", path, sp.Kind))
	}
	return &sp, path, nil
}

// writeSavedPlan writes pl for a later deploy FILE. Owner-only: it names
// what the application is made of.
func writeSavedPlan(c *cli.Context, path string, pl *plan.Plan) error {
	files, err := descriptorFiles(c)
	if err != nil {
		return err
	}
	for i, f := range files {
		if abs, err := filepath.Abs(f); err == nil {
			files[i] = abs
		}
	}
	b, err := json.MarshalIndent(savedPlanFile{Kind: savedPlanKind, Files: files, Plan: maskPlan(c, pl)}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the plan: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing the plan: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return errors.Join(fmt.Errorf("writing the plan: %w", err), os.Remove(tmp))
	}
	return nil
}
