package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/internal/testimage"
)

// creds holds two secrets (one from the environment, one from a file) in
// its config, and its content becomes its state; echo copies that state
// into its own config at apply time; loud fails with a message holding a
// secret (adapter stderr, errors, progress) until its fail is cleared.
const secretsApp = `
meta:
  name: APP
secrets:
  db_password: {env: E2E_DB_PASSWORD}
  api_key: {file: ./api.key}
TRICKY_SECRETS
plugs:
  files:
    path: ./out
resources:
  creds:
    type: IMAGE
    config:
      path: creds.txt
      content: "user=app password=${secret.db_password} key=${secret.api_key} TRICKY"
      delay_ms: 1500
  echo:
    type: IMAGE
    dependencies: {c: creds}
    config: {path: echo.txt, content: "copied ${resources.creds.state.content}", delay_ms: 500}
LOUD`

const loudResource = `
  loud:
    type: IMAGE
    config: {path: loud.txt, content: "${secret.api_key}", fail: "FAIL"}`

func randomSecret(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// captured collects everything a deployment showed: command outputs,
// state files, docker inspect of the adapter containers.
type captured struct {
	mu    sync.Mutex
	items map[string]string
}

func (c *captured) add(name, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.items == nil {
		c.items = map[string]string{}
	}
	c.items[name] += text
}

func (c *captured) result(cmd string, r result) {
	c.add(cmd+" (stdout)", r.stdout)
	c.add(cmd+" (stderr)", r.stderr)
}

// readDir adds every file under dir.
func (c *captured) readDir(label, dir string) {
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			c.add(label+" "+strings.TrimPrefix(p, dir), string(b)+"\n")
		}
		return nil
	})
}

// watch inspects every container of app and reads the state directory
// until stop is closed.
func (c *captured) watch(t *testing.T, app, stateDir string, stop <-chan struct{}, done chan<- int) {
	cli := testimage.Client(t)
	ctx := context.Background()
	seen := map[string]bool{}
	defer func() { done <- len(seen) }()
	for {
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "gcompose.app="+app))})
		if err == nil {
			for _, ct := range list {
				if _, raw, err := cli.ContainerInspectWithRaw(ctx, ct.ID, false); err == nil {
					seen[ct.ID] = true
					c.add("docker inspect "+ct.ID[:12], string(raw))
					c.add("docker ps "+ct.ID[:12], strings.Join(ct.Names, ",")+" "+ct.Command+" "+ct.Image+" "+labelsText(ct.Labels))
				}
			}
		}
		c.readDir("state file (during)", stateDir)
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func labelsText(m map[string]string) string {
	var b strings.Builder
	for k, v := range m {
		b.WriteString(k + "=" + v + " ")
	}
	return b.String()
}

// trickySecret is a secret value whose characters our outputs encode in
// different ways (JSON with and without HTML escaping, Go's %q, a
// validator's quoting, one line at a time), declared as ${secret.NAME}
// from $ENV. Each ends in a random token that no encoding changes, so a
// search for the token finds the value, or any part of it that holds the
// token, in whatever form an output shows it.
type trickySecret struct {
	name, env, value string
	tokens           []string
}

// trickySecrets: one value for each character that an encoding treats
// specially, one with all of them, and a value that is the prefix of one
// secret and the suffix of another.
func trickySecrets() []trickySecret {
	var all []trickySecret
	add := func(name string, parts ...string) {
		ts := trickySecret{name: "t_" + name, env: "E2E_SECRET_" + strings.ToUpper(name)}
		for i, p := range parts {
			if i%2 == 1 { // a token between the fixed parts
				p = randomSecret("")
				ts.tokens = append(ts.tokens, p)
			}
			ts.value += p
		}
		all = append(all, ts)
	}
	add("quote", `dq"`, "")
	add("backslash", `bs\`, "")
	add("lt", "lt<", "")
	add("gt", "gt>", "")
	add("amp", "amp&", "")
	add("apos", "it's-", "")
	add("newline", "line-one-", "", "\nline-two-", "")
	add("tab", "tab\t", "")
	add("nonascii", "grüße-", "")
	add("linesep", "ls\u2028", "")
	add("all", `all"\<>&'`+"\n\tgrüße\u2028", "")
	add("base", "base-", "")
	base := all[len(all)-1]
	prefixed := trickySecret{name: "t_prefixed", env: "E2E_SECRET_PREFIXED", tokens: []string{randomSecret("")}}
	prefixed.value = base.value + `&"tail-` + prefixed.tokens[0]
	suffixed := trickySecret{name: "t_suffixed", env: "E2E_SECRET_SUFFIXED", tokens: []string{randomSecret("")}}
	suffixed.value = `<head"-` + suffixed.tokens[0] + "-" + base.value
	return append(all, prefixed, suffixed)
}

// secretsRun is what the secret tests share: two secret values, one in
// $E2E_DB_PASSWORD and one in api.key beside the descriptors, and the
// tricky secrets in their variables; a state key file, and no key in the
// environment; and a watcher that captures every container and state file
// of the app until stopWatch.
type secretsRun struct {
	password, apiKey string
	tricky           []trickySecret
	keyFile          string
	got              *captured
	stopWatch        func() int // the number of containers seen
}

func startSecretsRun(t *testing.T, e *env) *secretsRun {
	t.Helper()
	sr := &secretsRun{password: randomSecret("pw-"), apiKey: randomSecret("ak-"), tricky: trickySecrets(), got: &captured{}}
	t.Setenv("E2E_DB_PASSWORD", sr.password)
	for _, ts := range sr.tricky {
		t.Setenv(ts.env, ts.value)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "api.key"), []byte(sr.apiKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	t.Setenv(secret.EnvKey, "")
	t.Setenv(secret.EnvPassphrase, "")
	t.Setenv(secret.EnvKeyFile, "")
	sr.keyFile = filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(sr.keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan int, 1)
	go sr.got.watch(t, e.app, e.state, stop, done)
	stopped := false
	sr.stopWatch = func() int {
		if stopped {
			return 0
		}
		stopped = true
		close(stop)
		return <-done
	}
	t.Cleanup(func() { sr.stopWatch() })
	return sr
}

// descriptor declares the tricky secrets at TRICKY_SECRETS (a line of the
// secrets: section) and writes TRICKY as all of them, space-separated.
func (sr *secretsRun) descriptor(body string) string {
	var decl, refs []string
	for _, ts := range sr.tricky {
		decl = append(decl, "  "+ts.name+": {env: "+ts.env+"}")
		refs = append(refs, "${secret."+ts.name+"}")
	}
	return strings.NewReplacer("TRICKY_SECRETS", strings.Join(decl, "\n"), "TRICKY", strings.Join(refs, " ")).Replace(body)
}

// trickyText is what TRICKY resolves to.
func (sr *secretsRun) trickyText() string {
	vals := make([]string, len(sr.tricky))
	for i, ts := range sr.tricky {
		vals[i] = ts.value
	}
	return strings.Join(vals, " ")
}

// search fails the test for every captured item that shows a secret
// value, or the token of a tricky one.
func (sr *secretsRun) search(t *testing.T, containers int) {
	t.Helper()
	hits := 0
	needles := map[string]string{sr.password: "db_password", sr.apiKey: "api_key"}
	for _, ts := range sr.tricky {
		for _, tok := range ts.tokens {
			needles[tok] = fmt.Sprintf("%s %q", ts.name, ts.value)
		}
	}
	for name, text := range sr.got.items {
		for s, what := range needles {
			if strings.Contains(text, s) {
				hits++
				t.Errorf("%s shows the secret %s:\n%s", name, what, excerpt(text, s))
			}
		}
	}
	t.Logf("searched %d outputs, state files and inspections (%d adapter containers) for %d secret values: %d hits", len(sr.got.items), containers, 2+len(sr.tricky), hits)
}

// TestE2ESecretsNeverShown deploys an app using two secrets with verbose
// and JSON progress, plans, re-deploys, fails an action whose message holds
// a secret, shows and pulls the state, and destroys; every output, every
// state file and docker inspect of every adapter container seen during the
// run are searched for the secret values: zero hits.
func TestE2ESecretsNeverShown(t *testing.T) {
	e := newEnv(t)
	sr := startSecretsRun(t, e)
	password, apiKey, keyFile := sr.password, sr.apiKey, sr.keyFile

	const failMessage = "cannot log in with password ${secret.db_password} TRICKY"
	loud := strings.ReplaceAll(loudResource, "FAIL", failMessage)
	app := sr.descriptor(secretsApp)
	f := e.write("app.yaml", strings.Replace(app, "LOUD", "", 1))
	fLoud := e.write("loud.yaml", sr.descriptor(strings.Replace(secretsApp, "LOUD", loud, 1)))
	fQuiet := e.write("quiet.yaml", strings.Replace(app, "LOUD", strings.Replace(loud, `fail: "`+failMessage+`"`, `mode: "0644"`, 1), 1))

	got, stopWatch := sr.got, sr.stopWatch

	gc := func(wantCode int, args ...string) result {
		t.Helper()
		var r result
		if args[0] == "validate" || args[0] == "config" {
			var out, errb strings.Builder
			code := run(context.Background(), append([]string{"gcompose"}, args...), strings.NewReader(""), &out, &errb)
			r = result{code, out.String(), errb.String()}
		} else {
			r = e.gc(args...)
		}
		got.result("gcompose "+strings.Join(args, " "), r)
		if r.code != wantCode {
			t.Fatalf("gcompose %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
		}
		return r
	}
	kf := "--state-key-file=" + keyFile

	gc(0, "validate", f)
	r := gc(0, "config", f)
	if !strings.Contains(r.stdout, "${secret.db_password}") || !strings.Contains(r.stdout, "env: E2E_DB_PASSWORD") {
		t.Errorf("config does not show the references:\n%s", r.stdout)
	}
	gc(0, "config", "--json", f)
	// Without a key, a deploy that would store secrets is refused up front.
	r = gc(1, "deploy", f, "--yes")
	if !strings.Contains(r.stderr, secret.EnvKey) || !strings.Contains(r.stderr, "db_password") {
		t.Errorf("deploy without a key: %s", r.stderr)
	}
	gc(0, "plan", f, "--verbose", kf)
	gc(0, "plan", f, "--json", "--verbose", kf)
	r = gc(0, "deploy", f, "--yes", "--verbose", "--json", kf)
	if !strings.Contains(r.stdout+r.stderr, "creds") {
		t.Errorf("deploy output names no resource:\n%s\n%s", r.stdout, r.stderr)
	}
	if c := e.read("creds.txt"); c != "user=app password="+password+" key="+apiKey+" "+sr.trickyText() {
		t.Fatalf("creds.txt = %q", c)
	}
	// The state is unreadable without the key: plan refuses, naming what is needed.
	r = gc(1, "plan", f)
	if !strings.Contains(r.stderr, "encrypted secrets") || !strings.Contains(r.stderr, secret.EnvKey) {
		t.Errorf("plan without a key: %s", r.stderr)
	}
	gc(0, "plan", f, "--verbose", kf)
	r = gc(0, "deploy", f, "--yes", "--verbose", "--progress", "plain", kf)
	if !strings.Contains(r.stdout, "up to date") {
		t.Errorf("re-deploy was not a no-op:\n%s", r.stdout)
	}
	// A failing action whose message holds a secret: errors, progress and
	// adapter stderr echoes are masked.
	r = gc(1, "deploy", fLoud, "--yes", "--verbose", kf)
	if !strings.Contains(r.stderr, "cannot log in with password "+secret.Mask) {
		t.Errorf("the failure is not shown masked:\n%s", r.stderr)
	}
	gc(1, "deploy", fLoud, "--yes", "--verbose", "--json", kf)
	r = gc(0, "plan", fQuiet, kf)
	if !strings.Contains(r.stdout, secret.Mask) {
		t.Errorf("the plan shows no masked value:\n%s", r.stdout)
	}
	gc(0, "deploy", fQuiet, "--yes", "--verbose", kf)

	for _, res := range []string{"resources.creds", "resources.echo", "resources.loud"} {
		r = gc(0, "state", "show", res, "-f", fQuiet, kf)
		if !strings.Contains(r.stdout, secret.Mask) {
			t.Errorf("state show %s masks nothing:\n%s", res, r.stdout)
		}
		gc(0, "state", "show", res, "--app", e.app)
	}
	r = gc(1, "state", "show", "resources.creds", "--app", e.app, "--show-secrets")
	if !strings.Contains(r.stderr, secret.EnvKey) {
		t.Errorf("--show-secrets without a key: %s", r.stderr)
	}
	gc(0, "state", "list", "--app", e.app)
	gc(0, "state", "pull", "--app", e.app)
	gc(0, "refresh", fQuiet, "--verbose", kf)

	// --show-secrets prints the values (and is left out of the search).
	shown := e.gc("state", "show", "resources.creds", "--app", e.app, "--show-secrets", kf)
	if shown.code != 0 || !strings.Contains(shown.stdout, password) {
		t.Errorf("--show-secrets: exit %d\n%s%s", shown.code, shown.stdout, shown.stderr)
	}

	gc(0, "destroy", fQuiet, "--yes", "--verbose", "--json", kf)
	containers := stopWatch()
	got.readDir("state file (after)", e.state)
	if containers == 0 {
		t.Error("no adapter container was seen: docker inspect was not exercised")
	}
	var stateFiles []string
	for name := range got.items {
		if strings.HasPrefix(name, "state file") {
			stateFiles = append(stateFiles, name)
		}
	}
	sort.Strings(stateFiles)
	t.Logf("state files read: %s", strings.Join(stateFiles, ", "))

	sr.search(t, containers)
}

func excerpt(text, s string) string {
	i := strings.Index(text, s)
	from, to := max(0, i-200), min(len(text), i+len(s)+200)
	return text[from:to]
}

// otherCommandsApp: creds keeps secrets in its config; web's adapter
// (testdata/logs-adapter) echoes its message, secrets, in its create
// action's output and in the command output it reports in its state
// (logs); listing's content interpolates an object (web's first log
// entry) into text, as JSON; the outputs read all of them. BAD is where a
// resource goes whose config breaks its adapter's schema with secrets.
const otherCommandsApp = `
meta:
  name: APP
secrets:
  db_password: {env: E2E_DB_PASSWORD}
  api_key: {file: ./api.key}
TRICKY_SECRETS
plugs:
  files:
    path: ./out
resources:
  creds:
    type: IMAGE
    config: {path: creds.txt, content: "user=app password=${secret.db_password} TRICKY"}
  web:
    type: LOGS
    config: {message: "MESSAGE TRICKY"}
  listing:
    type: IMAGE
    config: {path: listing.txt, content: "init log: ${resources.web.state.logs[0]}"}
BAD
outputs:
  creds: ${resources.creds.state.content}
  message: ${resources.web.state.message}
  init_log: "init log: ${resources.web.state.logs[0]}"
`

// badModeResource's mode, secrets, breaks the file adapter's pattern: the
// error quotes the value.
const badModeResource = `
  badmode:
    type: IMAGE
    config: {path: bad.txt, content: "x", mode: "${secret.db_password} TRICKY"}`

func TestE2ESecretsNeverShownByOtherCommands(t *testing.T) {
	e := newEnv(t)
	logsImage := testimage.Image(t, context.Background(), "./cmd/gcompose/testdata/logs-adapter", "gcompose-test/logs-adapter:e2e")
	sr := startSecretsRun(t, e)
	password, kf := sr.password, "--state-key-file="+sr.keyFile

	app := sr.descriptor(strings.ReplaceAll(otherCommandsApp, "LOGS", logsImage))
	bad := e.write("bad.yaml", strings.NewReplacer("MESSAGE", "${secret.api_key}", "BAD", sr.descriptor(badModeResource)).Replace(app))
	app = strings.Replace(app, "BAD", "", 1)
	f := e.write("app.yaml", strings.Replace(app, "MESSAGE", "${secret.api_key}", 1))
	// v2 changes both secret-bearing values, so that diff has them to show.
	f2 := e.write("app-v2.yaml", strings.NewReplacer("MESSAGE", "v2 ${secret.api_key}", "password=", "v2 password=").Replace(app))
	other, third := filepath.Join(e.dir, "state-other"), filepath.Join(e.dir, "state-third")

	got, stopWatch := sr.got, sr.stopWatch

	// gcAt runs gcompose on the state at dir (every command names its
	// state).
	gcAt := func(dir string, wantCode int, args ...string) result {
		t.Helper()
		var out, errb strings.Builder
		full := append(append([]string{"gcompose"}, args...), "--state", dir)
		r := result{run(context.Background(), full, strings.NewReader(""), &out, &errb), out.String(), errb.String()}
		got.result("gcompose "+strings.Join(args, " ")+" --state "+dir, r)
		if r.code != wantCode {
			t.Fatalf("gcompose %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, wantCode, r.stdout, r.stderr)
		}
		return r
	}
	gc := func(wantCode int, args ...string) result {
		t.Helper()
		return gcAt(e.state, wantCode, args...)
	}
	shows := func(r result, what string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(r.stdout+r.stderr, w) {
				t.Errorf("%s does not show %q:\nstdout:\n%s\nstderr:\n%s", what, w, r.stdout, r.stderr)
			}
		}
	}

	// Action output that echoes a secret, in plain and JSON progress.
	r := gc(0, "deploy", f, "--yes", "--verbose", "--progress", "plain", kf)
	shows(r, "deploy --verbose", "ran echo "+secret.Mask)
	if c := e.read("creds.txt"); c != "user=app password="+password+" "+sr.trickyText() {
		t.Fatalf("creds.txt = %q", c)
	}
	// An object interpolated into text reaches the adapter as JSON as
	// typed: "<" stays "<", not "\u003c".
	message := sr.apiKey + " " + sr.trickyText()
	if c, want := e.read("listing.txt"), "init log: "+jsonText(t, map[string]any{"command": "echo " + message, "exit_code": 0, "source": "init[0]", "stdout": message + "\n"}); c != want {
		t.Errorf("listing.txt, the first log entry interpolated:\n got %q\nwant %q", c, want)
	}
	shows(r, "deploy (outputs)", "creds    = "+secret.Mask, "init_log = "+secret.Mask, "message  = "+secret.Mask)
	gc(0, "plan", f2, "--verbose", kf)
	gc(0, "plan", f2, "--json", kf)
	r = gc(0, "deploy", f2, "--yes", "--verbose", "--json", kf)
	shows(r, "deploy --json --verbose", "resources.web")
	gc(0, "deploy", f, "--yes", "--verbose", "--json", kf)

	// gcompose output, every output and each, as text and JSON.
	gc(0, "output", "-f", f, kf)
	gc(0, "output", "-f", f, "--json", kf)
	for _, name := range []string{"creds", "message", "init_log"} {
		r = gc(0, "output", name, "-f", f, kf)
		shows(r, "output "+name, secret.Mask)
		gc(0, "output", name, "-f", f, "--json", kf)
	}
	r = gc(1, "output", "-f", f)
	shows(r, "output without a key", secret.EnvKey)

	// A config that breaks its adapter's schema: the errors quote it.
	r = gc(1, "plan", bad, kf)
	shows(r, "plan of a bad config", "does not match the pattern")
	gc(1, "plan", bad, "--json", kf)
	gc(1, "deploy", bad, "--yes", "--json", kf)
	gc(1, "deploy", bad, "--yes", "--progress", "plain", kf)

	// logs: from the state, then following the adapter.
	r = gc(0, "logs", "--app", e.app, kf)
	// The command is masked as a whole: "echo S" was stored as one
	// secret-bearing value. The line after the masked stdout (its last
	// line: the message has line breaks) stays apart.
	shows(r, "logs --app", "==> resources.web init[0] "+secret.Mask+" (exit 0)", "resources.web | stdout: "+secret.Mask+"\n", secret.Mask+"\n==> resources.web poll")
	r = gc(0, "logs", "-f", f, kf)
	shows(r, "logs -f FILE", "resources.web | stdout: "+secret.Mask)
	gc(1, "logs", "--app", e.app)
	for _, by := range [][]string{{"--file", f}, {"--app", e.app}} {
		// Until a poll after the persisted one is shown.
		args := append(append([]string{"logs"}, by...), "--follow", "--interval", "500ms", "web", kf)
		polls := func(out string) int { return strings.Count(out, "==> resources.web poll") }
		r = e.follow(time.Minute, func(out string) bool { return polls(out) >= 2 }, args...)
		got.result("gcompose "+strings.Join(args, " "), r)
		if r.code != 0 || polls(r.stdout) < 2 {
			t.Errorf("logs --follow %s: exit %d, %d poll entries in a minute, want the persisted one and a new one:\n%s%s", by[0], r.code, polls(r.stdout), r.stdout, r.stderr)
		}
		shows(r, "logs --follow "+by[0], "resources.web | stdout: "+secret.Mask)
	}

	// diff: the state against both descriptors, with and without the key,
	// as text and JSON.
	r = gc(0, "diff", "-f", f, kf)
	shows(r, "diff (no change)", "No differences")
	r = gc(0, "diff", "-f", f2, kf)
	shows(r, "diff v2", "~ resources.web", "/config/message")
	gc(0, "diff", "-f", f2, "--json", kf)
	gc(0, "diff", "-f", f2)
	gc(0, "diff", "--from", "file:"+filepath.Join(e.state, e.app+".json"), "--to", f2, kf)
	gc(0, "diff", "--from", "file:"+filepath.Join(e.state, e.app+".json"), "--to", f2, "--json")

	// graph, from the descriptor and from the state.
	for _, format := range []string{"dot", "json", "mermaid"} {
		gc(0, "graph", f, "--format", format)
		gc(0, "graph", "--deployed", "--app", e.app, "--format", format)
	}

	// pull, push to another backend, mv to a third; the copies compare
	// equal with the key (values) and without (envelopes).
	pulled := gc(0, "state", "pull", "--app", e.app)
	doc := filepath.Join(e.dir, "pulled.json")
	if err := os.WriteFile(doc, []byte(pulled.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	r = gcAt(other, 0, "state", "push", doc, "--app", e.app)
	shows(r, "state push", "pushed 3 resources")
	gc(0, "state", "push", doc, "--app", e.app)
	gc(0, "state", "mv", "--app", e.app, "--to", third)
	r = gcAt(other, 0, "diff", "--from", "state:"+other+"#"+e.app, "--to", "state:"+third+"#"+e.app, "--all", kf)
	shows(r, "diff of the pushed and the moved copies", "No differences")
	gcAt(other, 0, "diff", "--from", "state:"+e.state+"#"+e.app, "--to", "state:"+third+"#"+e.app, "--all", "--json", kf)
	gcAt(third, 0, "logs", "--app", e.app, kf)
	r = gcAt(other, 0, "state", "show", "resources.web", "--app", e.app, kf)
	shows(r, "state show of the pushed copy", secret.Mask)

	gc(0, "destroy", f, "--yes", "--verbose", kf)
	containers := stopWatch()
	for _, dir := range []string{e.state, other, third} {
		got.readDir("state file "+filepath.Base(dir), dir)
	}
	got.add("pulled document", pulled.stdout)
	if containers == 0 {
		t.Error("no adapter container was seen: docker inspect was not exercised")
	}
	sr.search(t, containers)
}

// jsonText is v as our outputs and interpolation write JSON: compact, not
// HTML-escaped.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
