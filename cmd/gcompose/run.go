package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/core/desired"
	"github.com/gcompose/gcompose/core/engine"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/state"
)

func stateFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "state", Value: ".gcompose/state", EnvVars: []string{"GCOMPOSE_STATE"}, Usage: "state backend: a directory, file://DIR, etcd://host:2379[,host2:2379]/prefix (docs/state.md)"},
		&cli.DurationFlag{Name: "lock-timeout", Usage: "wait this long for a state lock someone else holds (default: fail at once)"},
		&cli.StringFlag{Name: "app", Usage: "application name (default: from the descriptor's meta.name)"},
		stateKeyFlag(),
	}, etcdFlags()...)
}

func engineFlags() []cli.Flag {
	return append(stateFlags(),
		&cli.IntFlag{Name: "parallelism", Value: 10, Usage: "resources worked on at once"},
		&cli.DurationFlag{Name: "call-timeout", Value: 10 * time.Minute, Usage: "kill an adapter call that runs longer"},
		&cli.DurationFlag{Name: "output-timeout", Value: 2 * time.Minute, Usage: "wait this long for a dependency output that is not reported yet"},
		&cli.StringFlag{Name: "network-image", Value: desired.DefaultImages().Network, Usage: "adapter image for GAP-16 networks"},
		&cli.StringFlag{Name: "service-image", Value: desired.DefaultImages().Service, Usage: "adapter image for GAP-16 services"},
		&cli.StringFlag{Name: "payments-image", Value: desired.DefaultImages().Payments, Usage: "adapter image for a Golem app's payments (allocation and keeper)"},
		&cli.StringFlag{Name: "proxy-image", Value: desired.DefaultImages().Proxy, Usage: "adapter image for the local HTTP/TCP proxies of Golem services"},
		&cli.BoolFlag{Name: "verbose", Usage: "pass verbose to adapters and show their stderr"},
	)
}

func openStore(c *cli.Context) (state.Store, error) {
	url, err := stateURL(c)
	if err != nil {
		return nil, err
	}
	return openStateURL(c, url)
}

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show what deploy would change, resource by resource",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "detailed-exitcode", Usage: "exit 0 when there is nothing to do, 2 when there are changes, 1 on error"},
			&cli.BoolFlag{Name: "json", Usage: "print the plan as JSON"},
			&cli.BoolFlag{Name: "destroy", Usage: "plan a destroy"},
			progressFlag(),
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
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "apply without asking for confirmation"},
			&cli.BoolFlag{Name: "json", Usage: "progress as JSON events on stderr (docs/events.md), the summary object on stdout"},
			progressFlag(),
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
		Usage:     "remove every resource of the application, dependents first",
		ArgsUsage: "[FILE|PACKAGE.zip ...]",
		Flags: append(append(descriptorFlags(), engineFlags()...),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "destroy without asking for confirmation"},
			&cli.BoolFlag{Name: "json", Usage: "progress as JSON events on stderr (docs/events.md), the summary object on stdout"},
			progressFlag(),
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
		Flags:     append(append(descriptorFlags(), engineFlags()...), &cli.BoolFlag{Name: "json", Usage: "print the result as JSON"}, progressFlag()),
		Action: func(c *cli.Context) error {
			_, err := runEngine(c, plan.Refresh, true)
			return err
		},
	}
}

// appName picks the application: --app, else the descriptor's name.
func appName(c *cli.Context, needDescriptor bool) (string, *project, error) {
	if !needDescriptor && c.String("app") != "" && c.NArg() == 0 && len(c.StringSlice("file")) == 0 {
		return c.String("app"), nil, nil
	}
	p, err := loadProject(c)
	if err != nil {
		return "", nil, err
	}
	name := p.app.Name
	if c.String("app") != "" {
		name = c.String("app")
	}
	return name, p, nil
}

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
	// fail ends a run that stopped before the engine started, so that a JSON
	// stream still ends with its summary.
	fail := func(name string, err error) (*engine.Outcome, error) {
		finishRun(c, prog, command, name, nil, !planOnly, time.Since(begin), err)
		return nil, err
	}
	name, p, err := appName(c, mode == plan.Deploy)
	if err != nil {
		return fail("", err)
	}
	var want map[string]*plan.Resource
	if mode == plan.Deploy {
		want, err = desired.Resources(p.resolved, golemImages(c))
		if err != nil {
			return fail(name, withCode(exitError, err))
		}
	}
	st, err := openSecretStore(c, p, !planOnly && mode == plan.Deploy)
	if err != nil {
		return fail(name, err)
	}
	defer st.Close()
	ad, rn, closeAdapters, err := newAdapters(c, name, p)
	if err != nil {
		return fail(name, withCode(exitError, err))
	}
	defer closeAdapters()

	jsonOut := c.Bool("json")
	e := &engine.Engine{
		Adapters:      withSecretFields(c, withCrashPoint(ad), ad.Client),
		Store:         st,
		Parallelism:   c.Int("parallelism"),
		LockTimeout:   c.Duration("lock-timeout"),
		Version:       version,
		OutputTimeout: c.Duration("output-timeout"),
		Observer:      prog.Observe,
		Cleanup:       rn.Cleanup,
		Release:       ad.Client.Close,
		Log: func(format string, args ...any) {
			prog.Note(progress.Warn, fmt.Sprintf(format, args...))
		},
	}
	req := engine.Request{App: name, Mode: mode, Desired: want, PlanOnly: planOnly}
	if !planOnly {
		req.Confirm = func(pl *plan.Plan) (bool, error) {
			prog.SetPlan(pl)
			if !jsonOut {
				maskPlan(c, pl).Render(c.App.Writer, false)
			}
			if !pl.HasChanges() {
				return true, nil
			}
			if c.Bool("yes") {
				return true, nil
			}
			return confirm(c.App.Reader, c.App.Writer, mode)
		}
	}
	start := time.Now()
	out, err := e.Run(c.Context, req)
	if out != nil {
		for _, r := range out.Pending {
			prog.Note(progress.Warn, fmt.Sprintf("%s had an interrupted %s (operation %s since %s); resolved through its adapter's state call",
				r.Name, r.Pending.Kind, r.Pending.ID, r.Pending.StartedAt.Format(time.RFC3339)))
		}
	}
	if planOnly && out != nil && out.Plan != nil {
		if jsonOut {
			b, _ := maskPlan(c, out.Plan).MarshalIndent()
			fmt.Fprintln(c.App.Writer, string(b))
		} else {
			maskPlan(c, out.Plan).Render(c.App.Writer, false)
		}
	}
	if err != nil {
		err = withCode(exitError, err)
	}
	finishRun(c, prog, command, name, out, !planOnly, time.Since(start), err)
	return out, err
}

// confirm asks on a terminal; without one it refuses rather than blocking or
// guessing, so a forgotten --yes in CI fails clearly.
func confirm(r io.Reader, w io.Writer, mode plan.Mode) (bool, error) {
	f, ok := r.(*os.File)
	if !ok || !isTerminal(f) {
		return false, withCode(exitError, fmt.Errorf("not asking for confirmation without a terminal: pass --yes to %s", mode))
	}
	fmt.Fprintf(w, "Do you want to %s? Only 'yes' will be accepted: ", mode)
	line, _ := bufio.NewReader(r).ReadString('\n')
	return strings.TrimSpace(line) == "yes", nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// golemImages are the adapter images of the Golem lowering (core/desired).
func golemImages(c *cli.Context) desired.Images {
	return desired.Images{Network: c.String("network-image"), Service: c.String("service-image"),
		Payments: c.String("payments-image"), Proxy: c.String("proxy-image")}
}
