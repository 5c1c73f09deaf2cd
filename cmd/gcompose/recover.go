package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/state"
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
	rc, ok := st.(state.Recoverer)
	if !ok {
		return withCode(exitError, fmt.Errorf("state recover: the %T backend keeps nothing to recover from", st))
	}
	if _, err := st.Load(c.Context, name); err == nil {
		fmt.Fprintf(c.App.Writer, "the state of app %q is intact: nothing to recover\n", name)
		return nil
	} else if !errors.Is(err, state.ErrMissingDocument) && !errors.Is(err, state.ErrCorrupt) {
		return withCode(exitError, err)
	}
	lock, err := state.Acquire(c.Context, st, name, state.NewLockInfo("state recover", version), c.Duration("lock-timeout"))
	if err != nil {
		return withCode(exitError, err)
	}
	defer st.Unlock(c.Context, lock)
	rec, err := rc.Recover(c.Context, name)
	if err != nil {
		return withCode(exitError, err)
	}
	fmt.Fprint(c.App.ErrWriter, rec.String())
	if c.Bool("dry-run") {
		return printJSON(c.App.Writer, rec.Doc)
	}
	if len(rec.Lost) > 0 && !c.Bool("force") {
		return withCode(exitError, fmt.Errorf("part of the state of app %q could not be recovered (above): nothing was written. "+
			"Look with --dry-run; write what could be recovered with --force, then run gcompose refresh to compare it with what exists", name))
	}
	if err := st.Replace(c.Context, lock, rec.Doc, true); err != nil {
		return withCode(exitError, fmt.Errorf("writing the recovered state: %w", err))
	}
	fmt.Fprintf(c.App.Writer, "%s: state recovered (lineage %s, serial %d, %d resources); gcompose refresh compares it with what exists\n",
		name, rec.Doc.Lineage, rec.Doc.Serial, len(rec.Doc.Resources))
	return nil
}
