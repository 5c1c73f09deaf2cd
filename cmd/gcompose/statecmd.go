package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/project"
)

func stateCommand() *cli.Command {
	return &cli.Command{
		Name:  "state",
		Usage: "inspect the persisted state",
		Subcommands: append([]*cli.Command{
			{
				Name:      "list",
				Usage:     "list the resources of an application (or the applications, without --app or a descriptor)",
				ArgsUsage: "[FILE ...]",
				Flags:     append(descriptorFlags(), stateFlags()...),
				Action:    stateList,
			},
			{
				Name:         "show",
				Usage:        "show one resource: status, config, outputs, identity, pending operation (secrets masked unless --show-secrets)",
				ArgsUsage:    "RESOURCE",
				Flags:        append(append(descriptorFlags(), stateFlags()...), showSecretsFlag()),
				Action:       stateShow,
				BashComplete: completeResources,
			},
			{
				Name:  "lock",
				Usage: "show who holds the application's lock, for what, since when",
				Flags: append(descriptorFlags(), stateFlags()...),
				Action: func(c *cli.Context) error {
					name, _, err := appName(c, false)
					if err != nil {
						return err
					}
					st, err := openStore(c)
					if err != nil {
						return err
					}
					defer st.Close()
					info, err := st.LockInfo(c.Context, name)
					if err != nil {
						return withCode(exitError, err)
					}
					if info == nil {
						fmt.Fprintf(c.App.Writer, "%s: not locked\n", name)
						return nil
					}
					return printJSON(c.App.Writer, info)
				},
			},
		}, append(stateSyncCommands(), stateRecoverCommand())...),
	}
}

func stateList(c *cli.Context) error {
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	if c.String("app") == "" && c.NArg() == 0 && len(fileArgs(c)) == 0 {
		if _, err := descriptorFiles(c); err != nil {
			apps, err := st.Apps(c.Context)
			if err != nil {
				return withCode(exitError, err)
			}
			for _, a := range apps {
				fmt.Fprintln(c.App.Writer, a)
			}
			return nil
		}
	}
	name, _, err := appName(c, false)
	if err != nil {
		return err
	}
	doc, err := st.Load(c.Context, name)
	if err != nil {
		return withCode(exitError, err)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tSTATUS\tTYPE\tPENDING")
	for _, n := range doc.Names() {
		r := doc.Resources[n]
		pending := ""
		if r.Pending != nil {
			pending = string(r.Pending.Kind) + " " + r.Pending.Action
		}
		if f := failedStep(r); f != "" {
			pending = f
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, shownStatus(r), r.Type, pending)
	}
	return tw.Flush()
}

func stateShow(c *cli.Context) error {
	if c.NArg() != 1 {
		return withCode(exitUsage, fmt.Errorf("state show takes one resource name (see gcompose state list)"))
	}
	resName := c.Args().First()
	// The positional argument is the resource, so the descriptor only comes from -f.
	name := c.String("app")
	if name == "" {
		p, err := loadFiles(c, fileArgs(c))
		if err != nil {
			return err
		}
		name = p.App.Name
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, err := loadShown(c, st, name)
	if err != nil {
		return withCode(exitError, err)
	}
	r := doc.Resources[resName]
	if r == nil {
		return withCode(exitError, fmt.Errorf("no resource %q in the state of %s (gcompose state list shows what there is)", resName, name))
	}
	// The status told truly: Failed when its last step failed (the
	// pending operation says which and why).
	shown := *r
	shown.Status = project.Status(shownStatus(r))
	return showResource(c, &shown)
}

func unlockCommand() *cli.Command {
	return &cli.Command{
		Name:      "unlock",
		Usage:     "remove an application's state lock by its ID (when its holder died)",
		ArgsUsage: "LOCK_ID",
		Flags:     append(descriptorFlags(), stateFlags()...),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return withCode(exitUsage, fmt.Errorf("unlock takes the lock ID that the lock error printed"))
			}
			id := c.Args().First()
			st, err := openStore(c)
			if err != nil {
				return err
			}
			defer st.Close()
			name := c.String("app")
			if name == "" {
				p, err := loadFiles(c, fileArgs(c))
				if err != nil {
					return err
				}
				name = p.App.Name
			}
			if err := st.ForceUnlock(c.Context, name, id); err != nil {
				return withCode(exitError, err)
			}
			fmt.Fprintf(c.App.Writer, "%s: lock %s removed\n", name, id)
			return nil
		},
	}
}
