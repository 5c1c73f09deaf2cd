package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/stateurl"
)

// etcdFlags configure an etcd:// --state (and state mv --to). Unset, each
// comes from its GCOMPOSE_ETCD_* variable; the password only from
// GCOMPOSE_ETCD_PASSWORD or a file, never from the command line.
func etcdFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "etcd-cacert", Usage: "etcd: CA certificate (PEM) to verify the servers (or $" + stateurl.EnvCACert + ")"},
		&cli.StringFlag{Name: "etcd-cert", Usage: "etcd: client certificate (PEM) (or $" + stateurl.EnvCert + ")"},
		&cli.StringFlag{Name: "etcd-key", Usage: "etcd: client certificate's key (PEM) (or $" + stateurl.EnvKey + ")"},
		&cli.StringFlag{Name: "etcd-user", Usage: "etcd: user name (or $" + stateurl.EnvUser + ", or etcd://user@host)"},
		&cli.StringFlag{Name: "etcd-password-file", Usage: "etcd: file holding the password (or $" + stateurl.EnvPassword + ")"},
		&cli.DurationFlag{Name: "etcd-lock-ttl", DefaultText: "15s", Usage: "etcd: a lock whose holder stops renewing it expires after this `DURATION` (or $" + stateurl.EnvLockTTL + ")"},
	}
}

// openStateURL opens the store url names with the etcd flags' options.
func openStateURL(c *cli.Context, url string) (*project.State, error) {
	opts := project.StateOptions{
		EtcdCACert:  c.String("etcd-cacert"),
		EtcdCert:    c.String("etcd-cert"),
		EtcdKey:     c.String("etcd-key"),
		EtcdUser:    c.String("etcd-user"),
		EtcdLockTTL: c.Duration("etcd-lock-ttl"),
	}
	if f := c.String("etcd-password-file"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, withCode(exitError, fmt.Errorf("etcd password file: %w", err))
		}
		opts.EtcdPassword = strings.TrimRight(string(b), "\r\n")
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := project.OpenState(ctx, url, opts)
	if err != nil {
		return nil, withCode(exitError, err)
	}
	return st, nil
}

func stateSyncCommands() []*cli.Command {
	return []*cli.Command{
		{
			Name:   "pull",
			Usage:  "print the application's state document as JSON",
			Flags:  append(descriptorFlags(), stateFlags()...),
			Action: statePull,
		},
		{
			Name:      "push",
			Usage:     "replace the application's state by a document (FILE, or - for stdin); refuses another lineage or an older serial unless --force",
			ArgsUsage: "FILE",
			Flags: append(append(descriptorFlags(), stateFlags()...),
				&cli.BoolFlag{Name: "force", Usage: "push even over another lineage, a newer serial, or another application's name"},
			),
			Action: statePush,
		},
		{
			Name:  "mv",
			Usage: "copy the application's state from --state to --to (another backend: file, etcd), then remove the source only with --remove-source",
			Flags: append(append(descriptorFlags(), stateFlags()...),
				&cli.StringFlag{Name: "to", Required: true, Usage: "the target state URL (a directory, file://DIR, etcd://host:2379/prefix)"},
				&cli.BoolFlag{Name: "remove-source", Usage: "remove the state from --state once the target holds it"},
				&cli.BoolFlag{Name: "force", Usage: "overwrite a target holding another lineage or a newer serial"},
			),
			Action: stateMove,
		},
	}
}

// stateAppName is the application of a state command whose positional
// arguments are not descriptors: --app, else -f's descriptor.
func stateAppName(c *cli.Context) (string, error) {
	if n := c.String("app"); n != "" {
		return n, nil
	}
	if len(fileArgs(c)) == 0 {
		return "", nil
	}
	p, err := loadFiles(c, fileArgs(c))
	if err != nil {
		return "", err
	}
	return p.App.Name, nil
}

func statePull(c *cli.Context) error {
	name, doc, err := loadAppState(c)
	if err != nil {
		return err
	}
	if doc.Serial == 0 {
		return withCode(exitError, fmt.Errorf("no state for app %q in %s", name, c.String("state")))
	}
	if err := printJSON(c.App.Writer, doc); err != nil {
		return withCode(exitError, fmt.Errorf("state for app %q: encoding: %w", name, err))
	}
	return nil
}

func readDocument(c *cli.Context, path string) (*project.Document, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(c.App.Reader)
		path = "stdin"
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("state document: %w", err)
	}
	// A copy of a state file (APP.json, APP.json.backup) carries its
	// checksum, which must match; unknown keys are refused.
	doc, err := project.DecodeDocument(data)
	if err != nil {
		return nil, fmt.Errorf("state document %s: %w", path, err)
	}
	return doc, nil
}

func statePush(c *cli.Context) error {
	if c.NArg() != 1 {
		return withCode(exitUsage, errors.New("state push takes one document file (or - for stdin), as written by gcompose state pull"))
	}
	doc, err := readDocument(c, c.Args().First())
	if err != nil {
		return withCode(exitError, err)
	}
	name, err := stateAppName(c)
	if err != nil {
		return err
	}
	if name == "" {
		name = doc.App
	}
	if name == "" {
		return withCode(exitUsage, errors.New("state push: the document names no application; give --app"))
	}
	force := c.Bool("force")
	if doc.App != "" && doc.App != name && !force {
		return withCode(exitError, fmt.Errorf("state push: the document is the state of app %q, not %q; use --force to push it as %q", doc.App, name, name))
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer st.Close()
	after, err := st.Push(c.Context, name, doc, force, project.Locking{Operation: "state push", Version: version, Timeout: c.Duration("lock-timeout")})
	if err != nil {
		return withCode(exitError, err)
	}
	fmt.Fprintf(c.App.Writer, "%s: pushed %d resources; serial %d, lineage %s\n", name, len(after.Resources), after.Serial, after.Lineage)
	return nil
}

func stateMove(c *cli.Context) error {
	name, _, err := appName(c, false)
	if err != nil {
		return err
	}
	from, err := stateURL(c)
	if err != nil {
		return err
	}
	to := c.String("to")
	shownFrom, shownTo := stateurl.Redact(from), stateurl.Redact(to)
	if from == to {
		return withCode(exitUsage, fmt.Errorf("state mv: --to %s is --state itself", shownTo))
	}
	src, err := openStore(c)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openStateURL(c, to)
	if err != nil {
		return err
	}
	defer dst.Close()
	got, err := src.Move(c.Context, dst, name, c.Bool("force"), c.Bool("remove-source"),
		project.Locking{Operation: "state mv", Version: version, Timeout: c.Duration("lock-timeout")})
	if errors.Is(err, project.ErrNoSuchState) || errors.Is(err, project.ErrCannotRemove) {
		err = fmt.Errorf("state mv: %w", err)
	}
	if err != nil {
		return withCode(exitError, err)
	}
	what := "kept"
	if c.Bool("remove-source") {
		what = "removed"
	}
	fmt.Fprintf(c.App.Writer, "%s: moved %d resources (serial %d, lineage %s) from %s to %s; source %s\n",
		name, len(got.Resources), got.Serial, got.Lineage, shownFrom, shownTo, what)
	return nil
}
