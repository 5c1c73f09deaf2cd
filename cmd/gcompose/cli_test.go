package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/golden"
)

// The help people read and the errors they get for a wrong command line:
// golden files, so a change to either is a reviewed change.
func TestHelpAndUsageErrors(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "cli"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // no gcompose.yaml around
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"--help"}, exitOK},
		{"no-args", nil, exitOK},
		{"deploy-help", []string{"deploy", "--help"}, exitOK},
		{"deploy-help-all", []string{"deploy", "--help-all"}, exitOK},
		{"logs-help", []string{"logs", "-h"}, exitOK},
		{"state-help", []string{"state", "--help"}, exitOK},
		{"state-show-help", []string{"state", "show", "--help"}, exitOK},
		{"typo-far-from-anything", []string{"frobnicate"}, exitUsage},
		{"typo-command", []string{"deplyo"}, exitUsage},
		{"typo-subcommand", []string{"state", "shwo"}, exitUsage},
		{"typo-flag", []string{"deploy", "--dry-rn"}, exitUsage},
		{"typo-flag-after-file", []string{"plan", "app.yaml", "--detailed-exitcod"}, exitUsage},
		{"flag-needs-value", []string{"plan", "--state"}, exitUsage},
		{"no-descriptor", []string{"plan"}, exitUsage},
		{"completion-unknown-shell", []string{"completion", "tcsh"}, exitUsage},
		{"state-show-no-resource", []string{"state", "show", "--app", "x"}, exitUsage},
		{"lock-timeout-negative", []string{"deploy", "app.yaml", "--lock-timeout", "-5s"}, exitUsage},
		{"lock-timeout-negative-state", []string{"state", "list", "--app", "x", "--lock-timeout=-1ns"}, exitUsage},
		{"cost-no-state", []string{"cost", "--app", "nosuch"}, exitError},
		{"cost-no-state-cached", []string{"cost", "--app", "nosuch", "--cached", "--json"}, exitError},
		{"plan-help", []string{"plan", "--help"}, exitOK},
		{"refresh-help", []string{"refresh", "--help"}, exitOK},
		{"ps-help", []string{"ps", "--help"}, exitOK},
		{"missing-descriptor-file", []string{"plan", "nosuch.yaml"}, exitError},
		{"help-unknown-topic", []string{"help", "nosuch"}, exitUsage},
		{"help-typo-topic", []string{"help", "state", "shwo"}, exitUsage},
		{"help-state-show", []string{"help", "state", "show"}, exitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := gcPlain(tc.args...)
			if r.code != tc.code {
				t.Errorf("gcompose %s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), r.code, tc.code, r.stdout, r.stderr)
			}
			golden.CheckString(t, filepath.Join(dir, tc.name+".golden"), "$ gcompose "+strings.Join(tc.args, " ")+"\n--- stdout\n"+r.stdout+"--- stderr\n"+r.stderr)
			if tc.code == exitUsage && len(strings.Split(strings.TrimSpace(r.stderr), "\n")) > 4 {
				t.Errorf("a usage error is a few lines, not the whole help:\n%s", r.stderr)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		r := gcPlain(args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "gcompose version "+version+" (commit ") {
			t.Errorf("gcompose %s: exit %d, %q", args, r.code, r.stdout)
		}
	}
}

// Flags go before or after the files, -f works before the command as in
// docker compose, and `logs -f` follows unless a descriptor comes next.
func TestReorderArgs(t *testing.T) {
	app := newApp(nil, nil, nil)
	for _, tc := range []struct{ in, want string }{
		{"deploy app.yaml --yes", "deploy --yes -- app.yaml"},
		{"deploy --yes app.yaml", "deploy --yes -- app.yaml"},
		{"deploy app.yaml -f prod.yaml", "deploy -f prod.yaml -- app.yaml"},
		{"-f app.yaml deploy --yes", "-f app.yaml deploy --yes"},
		{"--file=app.yaml logs -f", "--file=app.yaml logs --follow"},
		{"logs -f", "logs --follow"},
		{"logs -f web-service", "logs --follow -- web-service"},
		{"logs -f app.yaml web-service", "logs -f app.yaml -- web-service"},
		{"logs --follow -f app.yaml", "logs --follow -f app.yaml"},
		{"state show -f app.yaml services.web", "state show -f app.yaml -- services.web"},
		{"deplyo app.yaml", "deplyo app.yaml"},
		{"deploy app.yaml --generate-bash-completion", "deploy app.yaml --generate-bash-completion"},
		{"deploy - --generate-bash-completion", "deploy - --generate-bash-completion"},
		{"deploy --yes --generate-bash-completion", "deploy --yes --generate-bash-completion"},
	} {
		got := reorderArgs(app, append([]string{"gcompose"}, strings.Fields(tc.in)...))[1:]
		if !reflect.DeepEqual(got, strings.Fields(tc.want)) {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, strings.Fields(tc.want))
		}
	}
}

// GCOMPOSE_VAR_name sets ${var.name}, below --var-file and --var.
func TestVarsFromEnvironment(t *testing.T) {
	varFile := filepath.Join(t.TempDir(), "vars.env")
	if err := os.WriteFile(varFile, []byte("size=from-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GCOMPOSE_VAR_region", "eu")
	t.Setenv("GCOMPOSE_VAR_size", "from-env")
	t.Setenv("GCOMPOSE_VAR_", "ignored")
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{nil, map[string]string{"region": "eu", "size": "from-env"}},
		{[]string{"--var-file", varFile}, map[string]string{"region": "eu", "size": "from-file"}},
		{[]string{"--var-file", varFile, "--var", "size=from-flag"}, map[string]string{"region": "eu", "size": "from-flag"}},
	} {
		var got map[string]string
		app := &cli.App{Name: "t", Flags: descriptorFlags(), Action: func(c *cli.Context) (err error) {
			got, err = loadVars(c)
			return err
		}}
		if err := app.Run(append([]string{"t"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: vars %v, want %v", tc.args, got, tc.want)
		}
	}
}

// The bash completion script, sourced into a real bash and run the way
// bash runs it (COMP_WORDS, COMP_CWORD), against the built binary.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := gcomposeBinary(t)
	dir := t.TempDir()
	for name, body := range map[string]string{
		"app.yaml":   "meta:\n  name: shop\nresources:\n  web:\n    type: x/y:1\n    config: {}\n",
		"prod.yml":   "meta:\n  name: shop\n",
		"notes.txt":  "not a descriptor\n",
		"sub/a.yaml": "meta:\n  name: a\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seedState(t, filepath.Join(dir, ".gcompose", "state"), "shop",
		&state.Resource{Name: "resources.web", Type: "x/y:1", Status: state.StatusActive},
		&state.Resource{Name: "services.api", Type: "x/y:1", Status: state.StatusActive})
	complete := func(line string) []string {
		t.Helper()
		script := `source <(gcompose completion bash)
read -ra COMP_WORDS <<< "$1"
[[ "$1" == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_gcompose_complete
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, "-c", script, "_", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "bad substitution") {
			t.Fatalf("completing %q: %v\n%s", line, err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		line      string
		want, not []string
	}{
		{"gcompose dep", []string{"deploy"}, nil},
		{"gcompose deploy --st", []string{"--state", "--state-key-file"}, []string{"--yes"}},
		{"gcompose deploy -", []string{"--yes", "--file", "--var"}, nil},
		{"gcompose deploy -f ", []string{"app.yaml", "prod.yml", "sub"}, []string{"notes.txt"}},
		{"gcompose -f ", []string{"app.yaml"}, []string{"notes.txt"}},
		{"gcompose state show -f app.yaml ", []string{"resources.web", "services.api"}, nil},
		{"gcompose state show --app shop serv", []string{"services.api"}, []string{"resources.web"}},
		{"gcompose -f app.yaml logs ", []string{"resources.web", "services.api"}, nil},
		{"gcompose state sh", []string{"show"}, nil},
		{"gcompose deploy --", []string{"--yes", "--file", "--target"}, []string{"-f"}},
		{"gcompose destroy -f app.yaml --target ", []string{"resources.web", "services.api"}, []string{"--yes"}},
		{"gcompose plan app.yaml --replace serv", []string{"services.api"}, []string{"resources.web"}},
		{"gcompose deploy app.yaml --y", []string{"--yes"}, []string{"resources.web"}},
		{"gcompose destroy ", nil, []string{"resources.web", "--yes"}}, // files: the shell's own completion
	} {
		got := complete(tc.line)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: candidates %q lack %q", tc.line, got, w)
			}
		}
		for _, w := range tc.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: candidates %q include %q", tc.line, got, w)
			}
		}
	}
}

// graph shows what a deploy really walks: the payments and the proxy the
// Golem lowering adds, marked implicit, with their edges.
func TestGraphShowsImplicitResources(t *testing.T) {
	webapp := filepath.Join("..", "..", "examples", "webapp", "webapp.yaml")
	r := gcPlain("graph", webapp, "--format", "json")
	if r.code != 0 {
		t.Fatalf("graph: exit %d\n%s", r.code, r.stderr)
	}
	var g struct {
		Vertices []struct {
			ID    string         `json:"id"`
			Attrs map[string]any `json:"attributes"`
		} `json:"vertices"`
		Edges []struct{ From, To, Kind string } `json:"edges"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &g); err != nil {
		t.Fatal(err)
	}
	implicit := map[string]bool{}
	for _, v := range g.Vertices {
		if v.Attrs["implicit"] == true {
			implicit[v.ID] = true
		}
	}
	want := map[string]bool{"resources.golem-payments": true, "resources.golem-proxy-web-service": true}
	if !reflect.DeepEqual(implicit, want) {
		t.Errorf("implicit vertices %v, want %v", implicit, want)
	}
	edges := map[string]string{}
	for _, e := range g.Edges {
		edges[e.From+" -> "+e.To] = e.Kind
	}
	for _, e := range []string{"services.web-service -> resources.golem-payments", "resources.golem-proxy-web-service -> services.web-service"} {
		if edges[e] != "implicit" {
			t.Errorf("edge %s: kind %q, want implicit (edges: %v)", e, edges[e], edges)
		}
	}
	if edges["services.web-service -> services.db-service"] != "reference" {
		t.Errorf("the descriptor's own edges must stay: %v", edges)
	}
	dot := gcPlain("graph", webapp).stdout
	if !strings.Contains(dot, `"resources.golem-payments" [label="resources.golem-payments\n(implicit)", shape=component, style=dashed]`) {
		t.Errorf("DOT does not mark the payments implicit:\n%s", dot)
	}
	// A generic app gets nothing added.
	files := gcPlain("graph", filepath.Join("..", "..", "examples", "files", "gcompose.yaml"), "--format", "mermaid").stdout
	if strings.Contains(files, "implicit") {
		t.Errorf("implicit resources in a generic app:\n%s", files)
	}
}

// Every command that reads a descriptor takes the state flags too, used or not, so that one set of flags (a
// shell alias, a CI variable) works for all of them: `validate --state DIR` was refused while `plan --state
// DIR` and `graph --state DIR` took it.
func TestEveryDescriptorCommandTakesTheStateFlags(t *testing.T) {
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := strings.TrimSpace(prefix + " " + c.Name)
			walk(name, c.Subcommands)
			has := map[string]bool{}
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					has[n] = true
				}
			}
			if !has["file"] {
				continue
			}
			for _, want := range []string{"state", "app", "lock-timeout"} {
				if !has[want] {
					t.Errorf("gcompose %s takes -f but not --%s", name, want)
				}
			}
		}
	}
	walk("", newApp(nil, nil, nil).Commands)
	dir := filepath.Join("..", "..", "examples", "files", "gcompose.yaml")
	for _, cmd := range []string{"validate", "config"} {
		if r := gcPlain(cmd, "--state", t.TempDir(), "--app", "files-demo", dir); r.code != exitOK {
			t.Errorf("gcompose %s --state DIR: exit %d\n%s", cmd, r.code, r.stderr)
		}
	}
}
