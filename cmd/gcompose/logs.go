package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/protocol"
)

// LogsMember is the member of an adapter's VALID state that holds what the
// resource's commands printed (docs/protocol.md, "Command output").
const LogsMember = "logs"

// logEntry is one command's output as an adapter reports it.
type logEntry struct {
	Source string
	Stdout string
	Stderr string
	Exit   string
}

func (e logEntry) key() string {
	return e.Source + "\x00" + e.Stdout + "\x00" + e.Stderr + "\x00" + e.Exit
}

// logEntries reads state.logs: an array of {source, command, stdout,
// stderr, exit_code, time}, or a single string.
func logEntries(st map[string]any) ([]logEntry, bool) {
	v, ok := st[LogsMember]
	if !ok {
		return nil, false
	}
	var out []logEntry
	switch x := v.(type) {
	case string:
		out = append(out, logEntry{Stdout: x})
	case []any:
		for i, e := range x {
			switch m := e.(type) {
			case string:
				out = append(out, logEntry{Source: fmt.Sprintf("[%d]", i), Stdout: m})
			case map[string]any:
				le := logEntry{Source: str(m["source"]), Stdout: str(m["stdout"]), Stderr: str(m["stderr"])}
				if le.Source == "" {
					le.Source = fmt.Sprintf("[%d]", i)
				}
				if cmd := str(m["command"]); cmd != "" {
					le.Source += " " + cmd
				}
				if ec, ok := m["exit_code"]; ok {
					le.Exit = fmt.Sprint(ec)
				}
				out = append(out, le)
			}
		}
	}
	return out, true
}

func str(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func logsCommand() *cli.Command {
	return &cli.Command{
		Name:  "logs",
		Usage: "show what the resources' commands printed (e.g. a Golem service's init commands), as their adapters reported it",
		Description: `Reads the "logs" member of each resource's last VALID state in the state store (docs/protocol.md,
   "Command output"). SERVICE selects resources: a full name (services.web, resources.a), or a service
   name (web: services.web and its instances services.web[0], ...). An adapter that reports no logs is
   listed as such. With --follow, gcompose asks the adapters' state call again every --interval and prints
   output not shown yet: it follows only as fast as adapters report, and shows nothing for those that
   report no logs.`,
		ArgsUsage: "[SERVICE ...]",
		Flags: append(append([]cli.Flag{}, engineFlags()...),
			fileFlag(),
			// -f is the descriptor, as everywhere; `logs -f` followed by
			// nothing, a flag or a service name is --follow (args.go), as
			// docker compose users type it.
			&cli.BoolFlag{Name: "follow", Usage: "keep asking the adapters for new output until interrupted (logs -f works too when no descriptor follows it)"},
			&cli.DurationFlag{Name: "interval", Value: 5 * time.Second, Usage: "with --follow: ask every `DURATION`"},
		),
		Action:       runLogs,
		BashComplete: completeResources,
	}
}

// selectResources picks the resources the arguments name (all without).
func selectResources(doc *project.Document, args []string) ([]*project.Resource, error) {
	var out []*project.Resource
	for _, n := range doc.Names() {
		r := doc.Resources[n]
		if len(args) == 0 {
			out = append(out, r)
			continue
		}
		for _, a := range args {
			// The addresses deploy and destroy take (plan.Matches).
			if plan.Matches(a, n) {
				out = append(out, r)
				break
			}
		}
	}
	if len(out) == 0 && len(args) > 0 {
		return nil, withCode(exitError, fmt.Errorf("no deployed resource matches %s (gcompose state list shows what there is)", strings.Join(args, ", ")))
	}
	return out, nil
}

func runLogs(c *cli.Context) error {
	var p *project.Project
	name := c.String("app")
	if fs := fileArgs(c); name == "" || len(fs) > 0 {
		var err error
		if p, err = loadFiles(c, fs); err != nil {
			return err
		}
		if name == "" {
			name = p.Name()
		}
	}
	// Through the secret guard: secret values are decrypted and learnt, so
	// output that quotes them is masked.
	codec, err := stateCodec(c)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	doc, err := st.LoadGuarded(c.Context, name, codec, redactor(c))
	st.Close()
	if err != nil {
		return withCode(exitError, err)
	}
	rs, err := selectResources(doc, c.Args().Slice())
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		fmt.Fprintf(c.App.Writer, "%s: nothing deployed\n", name)
		return nil
	}
	seen := map[string]map[string]bool{}
	for _, r := range rs {
		seen[r.Name] = map[string]bool{}
		es, ok := logEntries(r.State)
		if !ok {
			fmt.Fprintf(c.App.Writer, "%s: no logs (its adapter, %s, reports none)\n", r.Name, r.Type)
			continue
		}
		printEntries(c, r.Name, es, seen[r.Name])
	}
	if !c.Bool("follow") {
		return nil
	}
	// The same session as a deploy's: its state calls learn the secret
	// fields adapters declare, and what they print is redacted.
	sess, err := openSession(c, name, p, nil, nil)
	if err != nil {
		return err
	}
	defer sess.Close()
	return followLogs(c, sess, rs, seen)
}

// keysOf is the set of entries' keys.
func keysOf(es []logEntry) map[string]bool {
	out := make(map[string]bool, len(es))
	for _, e := range es {
		out[e.key()] = true
	}
	return out
}

func printEntries(c *cli.Context, res string, es []logEntry, seen map[string]bool) {
	for _, e := range es {
		if seen[e.key()] {
			continue
		}
		seen[e.key()] = true
		head := res
		if e.Source != "" {
			head += " " + e.Source
		}
		if e.Exit != "" {
			head += " (exit " + e.Exit + ")"
		}
		fmt.Fprintf(c.App.Writer, "==> %s\n", head)
		for _, stream := range []struct{ name, text string }{{"stdout", e.Stdout}, {"stderr", e.Stderr}} {
			if strings.TrimSpace(stream.text) == "" {
				continue
			}
			for _, l := range strings.Split(strings.TrimRight(stream.text, "\n"), "\n") {
				fmt.Fprintf(c.App.Writer, "%s | %s: %s\n", res, stream.name, l)
			}
		}
	}
}

// followLogs asks each resource's adapter for its state every interval and
// prints the log entries not seen yet. It changes nothing: only state calls
// with desired "present" and the persisted config.
func followLogs(c *cli.Context, sess *project.Session, rs []*project.Resource, seen map[string]map[string]bool) error {
	if sess.Project != nil {
		if err := sess.Project.EnsurePlugDirs(func(msg string) { fmt.Fprintln(c.App.ErrWriter, "note:", msg) }); err != nil {
			return withCode(exitError, err)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	t := time.NewTicker(c.Duration("interval"))
	defer t.Stop()
	for {
		select {
		case <-c.Context.Done():
			return nil
		case <-t.C:
		}
		for _, r := range rs {
			call := plan.Call{App: sess.App, Name: r.Name, AdapterName: r.CalledAs(), Type: r.Type, Config: r.Config,
				Persisted: &protocol.Persisted{State: r.State, Identity: r.Identity, Config: r.Config}}
			ans, err := sess.Adapters.State(c.Context, call, protocol.Present)
			if c.Context.Err() != nil {
				return nil
			}
			if err != nil {
				fmt.Fprintf(c.App.ErrWriter, "%s: state call: %v\n", r.Name, err)
				continue
			}
			if es, ok := logEntries(ans.State); ok {
				printEntries(c, r.Name, es, seen[r.Name])
				// Only what the adapter reports now can come again: an
				// entry that left its window is forgotten, so that memory
				// stays bounded by the window however long this follows.
				seen[r.Name] = keysOf(es)
			}
		}
	}
}
