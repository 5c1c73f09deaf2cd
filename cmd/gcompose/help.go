package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// Flag categories of --help, in the order people look for them.
const (
	catDescriptor = "Descriptor"
	catState      = "State"
	catRun        = "Run"
	catOutput     = "Output"
	catBackend    = "Backend"
)

// flagCategory files a flag under a help heading. Backend flags (etcd TLS,
// adapter images, call timeouts) are set once by whoever runs the
// infrastructure: they are out of the short help and shown by --help-all.
func flagCategory(name string) string {
	switch name {
	case "file", "ignore-unknown", "var", "var-file", "allow-host-path":
		return catDescriptor
	case "state", "lock-timeout", "app", "state-key-file", "show-secrets", "force", "to", "remove-source", "force-new-state", "dry-run",
		"leader-ttl":
		return catState
	case "yes", "parallelism", "verbose", "destroy", "follow", "interval", "interrupt-grace", "target", "replace", "out",
		"cycles", "grace", "max-backoff", "listen", "max-glm-per-hour", "max-glm-total":
		return catRun
	case "json", "progress", "format", "detailed-exitcode", "deployed", "exit-code", "from", "status", "outputs", "identity", "all", "cached":
		return catOutput
	}
	if strings.HasPrefix(name, "etcd-") || strings.HasSuffix(name, "-image") || name == "call-timeout" || name == "output-timeout" {
		return catBackend
	}
	return ""
}

// helpAllFlag shows the backend flags that --help leaves out.
const helpAllFlag = "help-all"

// examples are shown at the end of each command's --help.
func examples(path string) []string {
	switch path {
	case "validate":
		return []string{"gcompose validate app.yaml", "gcompose validate -f app.yaml -f prod.yaml"}
	case "config":
		return []string{"gcompose config -f app.yaml -f prod.yaml", "gcompose config app.yaml --json"}
	case "graph":
		return []string{"gcompose graph app.yaml --format mermaid", "gcompose graph --deployed --app shop | dot -Tsvg > shop.svg"}
	case "plan":
		return []string{"gcompose plan app.yaml", "gcompose plan -f app.yaml -f prod.yaml --detailed-exitcode", "gcompose plan --destroy app.yaml",
			"gcompose plan app.yaml -out app.plan && gcompose deploy app.plan"}
	case "deploy":
		return []string{"gcompose deploy app.yaml", "gcompose deploy -f app.yaml -f prod.yaml --yes",
			"GCOMPOSE_VAR_region=eu gcompose deploy app.yaml --var replicas=2",
			"gcompose deploy app.yaml web        # web and what it needs", "gcompose deploy app.plan            # a saved plan, as reviewed",
			"gcompose deploy app.yaml --replace services.db"}
	case "destroy":
		return []string{"gcompose destroy app.yaml", "gcompose destroy --app shop --yes", "gcompose destroy app.yaml --target web"}
	case "refresh":
		return []string{"gcompose refresh app.yaml", "gcompose refresh app.yaml --detailed-exitcode   # exit 2 on drift"}
	case "ps":
		return []string{"gcompose ps app.yaml", "gcompose ps --app shop --json"}
	case "logs":
		return []string{"gcompose logs web-service", "gcompose logs --follow -f app.yaml", "gcompose -f app.yaml logs -f web-service"}
	case "diff":
		return []string{"gcompose diff -f app.yaml", "gcompose diff --from state:ci/staging#shop --to state:ci/production#shop"}
	case "unlock":
		return []string{"gcompose unlock --app shop 6f1c2a0e"}
	case "output":
		return []string{"gcompose output -f app.yaml", "curl \"$(gcompose output url)\"", "gcompose output --json"}
	case "cost":
		return []string{"gcompose cost app.yaml", "gcompose cost --app shop --json"}
	case "reconcile":
		return []string{"gcompose reconcile app.yaml --state etcd://127.0.0.1:2379/gcompose",
			"gcompose reconcile app.yaml --interval 1m --max-glm-per-hour 2 --cycles 1   # one pass, for cron"}
	case "completion":
		return []string{"source <(gcompose completion bash)", "gcompose completion fish > ~/.config/fish/completions/gcompose.fish"}
	case "state list":
		return []string{"gcompose state list", "gcompose state list -f app.yaml"}
	case "state show":
		return []string{"gcompose state show -f app.yaml services.web-service"}
	case "state lock":
		return []string{"gcompose state lock --app shop"}
	case "state pull":
		return []string{"gcompose state pull --app shop > shop.json"}
	case "state push":
		return []string{"gcompose state push --app shop shop.json"}
	case "state mv":
		return []string{"gcompose state mv --app shop --to etcd://etcd-1:2379/gcompose"}
	}
	return nil
}

// setUpHelp gives every command urfave/cli's "did you mean" and a short
// usage error (exit 64) instead of the full help, flag categories, examples,
// and hides the backend flags behind --help-all.
func setUpHelp(app *cli.App) {
	app.Suggest = true
	app.CustomAppHelpTemplate = cli.AppHelpTemplate + `
EXAMPLES:
   gcompose deploy app.yaml                  plan, confirm, apply (--yes in scripts)
   gcompose -f app.yaml -f prod.yaml plan    several files merge in order
   gcompose state list -f app.yaml           what is deployed
   gcompose destroy app.yaml

Every command takes descriptor files positionally and as -f; without one, ./gcompose.yaml.
Docs: README.md and docs/ (cli.md for commands, flags and exit codes).
`
	app.OnUsageError = usageError
	app.Action = unknownCommand
	// With a help command of its own, urfave/cli adds no --help flag either.
	app.Commands = append(app.Commands, helpCommand())
	app.Flags = append(app.Flags, cli.HelpFlag)
	for _, cmd := range app.Commands {
		setUpCommandHelp(cmd, cmd.Name)
	}
}

func setUpCommandHelp(cmd *cli.Command, path string) {
	cmd.OnUsageError = usageError
	cmd.HideHelpCommand = true
	backend, categorized := false, false
	for _, f := range cmd.Flags {
		cat := flagCategory(f.Names()[0])
		setCategory(f, cat, cat == catBackend)
		backend = backend || cat == catBackend
		categorized = categorized || cat != ""
	}
	tmpl := cli.CommandHelpTemplate
	if len(cmd.Subcommands) > 0 {
		tmpl = cli.SubcommandHelpTemplate
		if cmd.Action == nil {
			cmd.Action = unknownCommand
		}
	}
	if categorized {
		// Flags in categories end with a blank line already.
		tmpl = strings.TrimSuffix(tmpl, "\n")
	}
	if ex := examples(path); len(ex) > 0 {
		tmpl += "\nEXAMPLES:\n   " + strings.Join(ex, "\n   ") + "\n"
	}
	if backend {
		tmpl += "\nBackend flags (etcd TLS, adapter images, timeouts) are left out: gcompose " + path + " --" + helpAllFlag + "\n"
		cmd.Flags = append(cmd.Flags, &cli.BoolFlag{Name: helpAllFlag, Usage: "show every flag, backend ones too", Category: catOutput})
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if c.Bool(helpAllFlag) {
				return showAllFlags(c)
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
	cmd.CustomHelpTemplate = tmpl
	for _, sub := range cmd.Subcommands {
		setUpCommandHelp(sub, path+" "+sub.Name)
	}
}

// showAllFlags prints the command's help with its backend flags, then stops
// the command: an exit code without an error.
func showAllFlags(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		if flagCategory(f.Names()[0]) == catBackend {
			setCategory(f, catBackend, false)
		}
	}
	tmpl := strings.SplitN(c.Command.CustomHelpTemplate, "\nBackend flags", 2)[0]
	// A fresh Command: urfave/cli caches a command's flag categories
	// without the hidden flags.
	cmd := c.Command
	cli.HelpPrinter(c.App.Writer, tmpl, &cli.Command{Name: cmd.Name, HelpName: cmd.HelpName, Usage: cmd.Usage,
		UsageText: cmd.UsageText, ArgsUsage: cmd.ArgsUsage, Description: cmd.Description, Flags: cmd.Flags})
	return withCode(exitOK, nil)
}

func setCategory(f cli.Flag, cat string, hidden bool) {
	switch f := f.(type) {
	case *cli.StringFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.StringSliceFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.BoolFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.IntFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.DurationFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.Float64Flag:
		f.Category, f.Hidden = cat, hidden
	case *cli.Int64Flag:
		f.Category, f.Hidden = cat, hidden
	case *cli.UintFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.PathFlag:
		f.Category, f.Hidden = cat, hidden
	case *cli.GenericFlag:
		f.Category, f.Hidden = cat, hidden
	}
}

// usageError is urfave/cli's OnUsageError: the problem, urfave/cli's "did
// you mean" for an unknown flag, and where to read more, in three lines
// rather than the whole help; exit 64.
func usageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	// Go's flag package names a flag with one dash whatever was typed
	// ("-detailed-exitcod"); the help and the docs write long names with two.
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		msg = "unknown flag " + dashed(name)
		if cli.SuggestFlag != nil {
			if s := cli.SuggestFlag(c.Command.VisibleFlags(), name, true); alike(strings.TrimLeft(s, "-"), name) {
				msg += "\n" + fmt.Sprintf(cli.SuggestDidYouMeanTemplate, s)
			}
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		msg = "flag " + dashed(strings.TrimPrefix(name, "-")) + " needs a value"
	}
	return withCode(exitUsage, errors.New(msg+"\n"+helpHint(c)))
}

// dashed writes a flag name as the help does: -f, --file.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// unknownCommand is the Action of gcompose and of a command with
// subcommands (gcompose state): without arguments it shows the help; with
// one, that is not a command: urfave/cli's suggestion, exit 64.
func unknownCommand(c *cli.Context) error {
	if !c.Args().Present() {
		if c.Command.Name == c.App.Name {
			return cli.ShowAppHelp(c)
		}
		return cli.ShowSubcommandHelp(c)
	}
	return notACommand(c.Command.HelpName, c.Command.Subcommands, c.Args().First())
}

// notACommand is the usage error for typed, which is none of cmds, the
// commands of parent ("gcompose", "gcompose state").
func notACommand(parent string, cmds []*cli.Command, typed string) error {
	msg := fmt.Sprintf("%q is not a %s command", typed, parent)
	if cli.SuggestCommand != nil {
		s := cli.SuggestCommand(visible(cmds), typed)
		var name string
		if _, err := fmt.Sscanf(s, cli.SuggestDidYouMeanTemplate, &name); err == nil && alike(name, typed) {
			msg += "\n" + s
		}
	}
	return withCode(exitUsage, fmt.Errorf("%s\nRun '%s --help' for usage.", msg, parent))
}

// helpCommand replaces urfave/cli's help command, whose unknown topic was
// an error (exit 1) with a suggestion however far ("nosuch": "unlock"):
// gcompose help COMMAND [SUBCOMMAND] shows what gcompose COMMAND
// [SUBCOMMAND] --help shows, and an unknown one is a usage error like any
// other.
func helpCommand() *cli.Command {
	return &cli.Command{
		Name:      "help",
		Aliases:   []string{"h"},
		Usage:     "show the commands, or one command's help (gcompose help state show)",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Action: func(c *cli.Context) error {
			topic := c.Args().Slice()
			if len(topic) == 0 {
				return cli.ShowAppHelp(c)
			}
			parent, cmds := c.App.Name, c.App.Commands
			for _, typed := range topic {
				cmd := findCommand(cmds, typed)
				if cmd == nil || cmd.Name == "help" {
					return notACommand(parent, cmds, typed)
				}
				parent, cmds = parent+" "+cmd.Name, cmd.Subcommands
			}
			return c.App.RunContext(c.Context, append(append([]string{c.App.Name}, topic...), "--help"))
		},
	}
}

// alike keeps urfave/cli's suggestion only when it is close to what was
// typed: it always names the nearest name, however far ("--dry-rn": "-y").
// The measure is the one urfave/cli ranks with (Jaro-Winkler, its
// parameters).
func alike(suggested, typed string) bool {
	return suggested != "" && smetrics.JaroWinkler(suggested, typed, 0.7, 4) >= 0.8
}

func visible(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

func helpHint(c *cli.Context) string {
	return fmt.Sprintf("Run '%s --help' for usage.", c.Command.HelpName)
}
