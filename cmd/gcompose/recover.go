package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/project"
)

func stateRecoverCommand() *cli.Command {
	return &cli.Command{
		Name:  "recover",
		Usage: "rebuild an application's lost or damaged state document from what is left: the backup and the journals (file), the resource keys (etcd)",
		Flags: append(append(descriptorFlags(), stateFlags()...),
			&cli.BoolFlag{Name: "dry-run", Usage: "say what would be recovered and print the document on stdout; write nothing"},
			&cli.BoolFlag{Name: "force", Usage: "write the recovered state even though part of what was left could not be used"},
		),
		Action: stateRecover,
	}
}

func stateRecover(c *cli.Context) error {
	name, _, err := appName(c, false)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	lk := project.Locking{Operation: "state recover", Version: version, Timeout: c.Duration("lock-timeout")}
	rec, err := st.Recover(c.Context, name, lk, func(rec *project.Recovery) (bool, error) {
		fmt.Fprint(c.App.ErrWriter, rec.String())
		if c.Bool("dry-run") {
			return false, printJSON(c.App.Writer, rec.Doc)
		}
		if len(rec.Lost) > 0 && !c.Bool("force") {
			return false, fmt.Errorf("part of the state of app %q could not be recovered (above): nothing was written. "+
				"Look with --dry-run; write what could be recovered with --force, then run gcompose refresh to compare it with what exists", name)
		}
		return true, nil
	})
	switch {
	case errors.Is(err, project.ErrIntact):
		fmt.Fprintf(c.App.Writer, "the state of app %q is intact: nothing to recover\n", name)
		return nil
	case errors.Is(err, project.ErrNoRecovery):
		return withCode(exitError, fmt.Errorf("state recover: %w", err))
	case err != nil:
		return withCode(exitError, err)
	case c.Bool("dry-run"):
		return nil
	}
	fmt.Fprintf(c.App.Writer, "%s: state recovered (lineage %s, serial %d, %d resources); gcompose refresh compares it with what exists\n",
		name, rec.Doc.Lineage, rec.Doc.Serial, len(rec.Doc.Resources))
	return nil
}
