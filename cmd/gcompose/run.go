package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/adapters/golem/lowering"
	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/apply"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show what deploy would change, resource by resource",
		ArgsUsage: "[FILE|PACKAGE.zip ...] [NAME ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "detailed-exitcode", Usage: "exit 0 when there is nothing to do, 2 when there are changes, 1 on error"},
			&cli.BoolFlag{Name: "json", Usage: "print the plan as JSON"},
			&cli.BoolFlag{Name: "destroy", Usage: "plan a destroy"},
			targetFlags(true)[0], targetFlags(true)[1],
			&cli.StringFlag{Name: "out", Usage: "save the plan to `FILE` (name it *.plan) for gcompose deploy FILE to apply exactly, without asking again"},
			progressFlag(),
			interruptGraceFlag(),
		),
		Action: func(c *cli.Context) error {
			mode := plan.Deploy
			if c.Bool("destroy") {
				mode = plan.Destroy
			}
			out, err := runEngine(c, mode, true)
			if err != nil {
				return err
			}
			if c.Bool("detailed-exitcode") && out.Plan.HasChanges() {
				return withCode(exitChanges, nil)
			}
			return nil
		},
	}
}

func deployCommand() *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Aliases:   []string{"apply", "up"},
		Usage:     "plan, confirm, and apply: create, update, rebuild and delete resources until they match the descriptor",
		ArgsUsage: "[FILE|PACKAGE.zip ...] [NAME ...] | SAVED.plan",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "apply without asking for confirmation"},
			targetFlags(true)[0], targetFlags(true)[1],
			&cli.BoolFlag{Name: "force-new-state", Usage: "start a new state although traces of a lost one exist, or objects of the application exist without a state here (docs/state.md)"},
			&cli.BoolFlag{Name: "json", Usage: "progress as JSON events on stderr (docs/events.md), the summary object on stdout"},
			progressFlag(),
			interruptGraceFlag(),
		),
		Action: func(c *cli.Context) error {
			_, err := runEngine(c, plan.Deploy, false)
			return err
		},
	}
}

func destroyCommand() *cli.Command {
	return &cli.Command{
		Name:      "destroy",
		Aliases:   []string{"down"},
		Usage:     "remove every resource of the application (or the NAMEs and what depends on them), dependents first",
		ArgsUsage: "[FILE|PACKAGE.zip ...] [NAME ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "destroy without asking for confirmation"},
			targetFlags(false)[0],
			&cli.BoolFlag{Name: "json", Usage: "progress as JSON events on stderr (docs/events.md), the summary object on stdout"},
			progressFlag(),
			interruptGraceFlag(),
		),
		Action: func(c *cli.Context) error {
			_, err := runEngine(c, plan.Destroy, false)
			return err
		},
	}
}

func refreshCommand() *cli.Command {
	return &cli.Command{
		Name:      "refresh",
		Usage:     "ask every deployed resource's adapter what really exists and show the drift; changes nothing",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			&cli.BoolFlag{Name: "detailed-exitcode", Usage: "exit 0 when nothing drifted, 2 when something did, 1 on error"},
			progressFlag(), interruptGraceFlag()),
		Action: func(c *cli.Context) error {
			out, err := runEngine(c, plan.Refresh, true)
			if err != nil {
				return err
			}
			if c.Bool("detailed-exitcode") && out.Plan.Drifted() > 0 {
				return withCode(exitChanges, nil)
			}
			return nil
		},
	}
}

// appName picks the application: --app, else the descriptor's name.
func appName(c *cli.Context, needDescriptor bool) (string, *project.Project, error) {
	if files, _ := splitPositional(c); !needDescriptor && c.String("app") != "" && len(files) == 0 && len(fileArgs(c)) == 0 {
		return c.String("app"), nil, nil
	}
	p, err := loadProject(c)
	if err != nil {
		return "", nil, err
	}
	name := p.Name()
	if c.String("app") != "" {
		name = c.String("app")
	}
	return name, p, nil
}

// runEngine parses the command's arguments, runs the engine through
// core/project and renders what happened.
func runEngine(c *cli.Context, mode plan.Mode, planOnly bool) (*engine.Outcome, error) {
	command := string(mode)
	if planOnly && mode != plan.Refresh {
		command = "plan"
	}
	prog, err := newRenderer(c, command)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	begin := time.Now()
	it := interruptsOf(c.App.Metadata, c.Context)
	// fail ends a run that stopped before the engine started, so that a JSON
	// stream still ends with its summary. An interrupt that cut what it
	// was doing short is the interrupt (130), not that error.
	fail := func(name string, err error) (*engine.Outcome, error) {
		if ie := it.asInterrupted(err, nil); ie != err {
			err = withCode(exitInterrupted, ie)
		}
		finishRun(c, prog, command, name, nil, nil, nil, !planOnly, time.Since(begin), err)
		return nil, err
	}
	var name string
	var p *project.Project
	saved, savedPath, err := savedPlanArg(c)
	switch {
	case err != nil:
		return fail("", err)
	case saved != nil && planOnly:
		return fail("", withCode(exitUsage, fmt.Errorf("%s is a saved plan: apply it with gcompose deploy %s", savedPath, savedPath)))
	case saved != nil:
		if saved.Mode != mode && !(mode == plan.Deploy && saved.Mode == plan.Destroy) {
			return fail(saved.App, withCode(exitUsage, fmt.Errorf("%s is a %s plan: apply it with gcompose deploy %s", savedPath, saved.Mode, savedPath)))
		}
		mode, name = saved.Mode, saved.App
		if c.String("app") != "" {
			name = c.String("app") // the engine refuses the plan if it was made for another
		}
		if p, err = loadFiles(c, saved.Files); err != nil {
			return fail(name, err)
		}
	default:
		if name, p, err = appName(c, mode == plan.Deploy); err != nil {
			return fail("", err)
		}
	}
	st, err := openStore(c)
	if err != nil {
		return fail(name, err)
	}
	// A name that names nothing is refused before the Docker Engine or an
	// adapter is asked anything.
	if saved == nil {
		if err := checkAddresses(c.Context, c, mode, name, p, st); err != nil {
			st.Close()
			return fail(name, err)
		}
	}
	sess, err := openSessionOn(c, name, p, st,
		func(msg string) { prog.Note(progress.Info, msg) },
		func(msg string) { prog.Note(progress.Warn, msg) })
	if err != nil {
		return fail(name, err)
	}
	defer sess.Close()
	if mode != plan.Destroy && p != nil {
		if err := lowering.BuildPayloads(c.Context, p.App, func(msg string) { prog.Note(progress.Info, msg) }); err != nil {
			return fail(name, withCode(exitError, err))
		}
	}

	jsonOut := c.Bool("json")
	// From here on, a first Ctrl-C lets what is under way finish.
	defer it.engage(c.Duration("interrupt-grace"), func(s interruptStage, grace time.Duration) {
		prog.Interrupt(interruptMessage(s, grace, prog.Running()))
	})()
	run := project.Run{Mode: mode, Observer: prog.Observe, PlanOnly: planOnly, ForceNewState: c.Bool("force-new-state"), Stop: it.soft,
		Targets: targetsOf(c), Replace: c.StringSlice("replace")}
	if saved != nil {
		run.Saved = saved.Plan
		prog.SetPlan(saved.Plan)
	}
	if !planOnly {
		run.Confirm = func(pl *plan.Plan) (bool, error) {
			prog.SetPlan(pl)
			if !jsonOut {
				maskPlan(c, pl).Render(c.App.Writer, renderOptions(c))
			}
			if !pl.HasChanges() {
				return true, nil
			}
			if err := planBudget(c.Context, p, mode, pl); err != nil {
				return false, err
			}
			if c.Bool("yes") {
				return true, nil
			}
			return confirmUnlessStopped(it.soft, c.App.Reader, c.App.Writer, mode)
		}
	}
	start := time.Now()
	res, err := sess.Run(c.Context, run)
	out := res.Outcome
	// What an earlier run left pending is resolved by the run that applies
	// (its state call found what exists, the apply recorded it): said once,
	// by that run. A plan or refresh changes nothing (the operation stays
	// pending): plan then deploy said it twice, "resolved" the first time
	// although nothing was.
	if out != nil && out.Result != nil {
		for _, r := range out.Pending {
			if p := r.Pending; p.Failed != "" {
				at := p.StartedAt
				if p.FailedAt != nil {
					at = *p.FailedAt
				}
				prog.Note(progress.Warn, fmt.Sprintf("%s: its %s failed in an earlier run (operation %s at %s: %s); resolved through its adapter's state call",
					r.Name, p.Kind, p.ID, at.Format(time.RFC3339), p.Failed))
				continue
			}
			prog.Note(progress.Warn, fmt.Sprintf("%s had an interrupted %s (operation %s since %s); resolved through its adapter's state call",
				r.Name, r.Pending.Kind, r.Pending.ID, r.Pending.StartedAt.Format(time.RFC3339)))
		}
	}
	if planOnly && out != nil && out.Plan != nil && c.String("out") != "" {
		if err == nil {
			if werr := writeSavedPlan(c, c.String("out"), out.Plan); werr != nil {
				err = werr
			} else {
				prog.Note(progress.Info, fmt.Sprintf("Saved the plan to %s: gcompose deploy %s applies exactly it.", c.String("out"), c.String("out")))
			}
		} else {
			prog.Note(progress.Warn, fmt.Sprintf("The plan was not saved to %s: it could not plan everything.", c.String("out")))
		}
	}
	if planOnly && out != nil && out.Plan != nil {
		if jsonOut {
			b, _ := maskPlan(c, out.Plan).MarshalIndent()
			fmt.Fprintln(c.App.Writer, string(b))
		} else {
			maskPlan(c, out.Plan).Render(c.App.Writer, renderOptions(c))
		}
		if err == nil {
			err = planBudget(c.Context, p, mode, out.Plan)
		}
	}
	var applied *apply.Result
	if out != nil {
		applied = out.Result
	}
	err = it.asInterrupted(err, applied)
	switch {
	case errors.Is(err, apply.ErrInterrupted):
		err = withCode(exitInterrupted, err)
	case err != nil:
		err = withCode(exitError, err)
	}
	for _, m := range res.Outputs.Missing {
		prog.Note(progress.Warn, "output "+m)
	}
	if res.Outputs.Err != nil {
		prog.Note(progress.Warn, res.Outputs.Err.Error())
	}
	finishRun(c, prog, command, name, out, res.Endpoints, res.Outputs.Values, !planOnly, time.Since(start), err)
	return out, err
}
