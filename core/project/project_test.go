package project

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/lower"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/plugpath"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/testimage"
)

// fileAdapterName names the file adapter image; testimage adds the
// content's hash to its tag, so that another checkout's run never replaces
// it.
const fileAdapterName = "gcompose/file-adapter:project-test"

// workdir copies testdata/name into a fresh directory, its IMAGE the test
// adapter image, with extra files beside it; it returns the descriptor's
// path.
func workdir(t *testing.T, name, image string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "IMAGE", image)), 0o644); err != nil {
		t.Fatal(err)
	}
	for f, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func load(t *testing.T, path string, red *secret.Redactor) *Project {
	t.Helper()
	p, diags := Load(context.Background(), LoadOptions{Files: []string{path}, Plugs: plugpath.Policy{WorkDir: filepath.Dir(path)},
		Lowering: lower.Generic{}, Redactor: red})
	if diags.HasErrors() {
		t.Fatalf("load %s: %v", path, diags)
	}
	return p
}

func TestLoad(t *testing.T) {
	t.Run("resolves, lowers and learns secrets", func(t *testing.T) {
		red := secret.NewRedactor()
		path := workdir(t, "secret.yaml", fileAdapterName, map[string]string{"token.txt": "tok-4711"})
		p := load(t, path, red)
		if p.Name() != "projectsecret" || p.PlugPaths["files"] != filepath.Join(filepath.Dir(path), "out") {
			t.Errorf("project %s, plugs %v", p.Name(), p.PlugPaths)
		}
		if got := red.Redact("token = tok-4711"); got != "token = (sensitive)" {
			t.Errorf("the secret was not learnt: %q", got)
		}
		want, err := p.Desired()
		if err != nil || len(want) != 1 || want["resources.conf"].Config["content"] != "token = tok-4711\n" {
			t.Fatalf("desired %v, %v", want, err)
		}
		if names := p.SecretNames(); len(names) != 1 || names[0] != "token" {
			t.Errorf("secret names %v", names)
		}
	})
	t.Run("an error names where it is", func(t *testing.T) {
		p, diags := Load(context.Background(), LoadOptions{Files: []string{"testdata/broken.yaml"}, Plugs: plugpath.Policy{WorkDir: "."}})
		if p != nil || !diags.HasErrors() {
			t.Fatalf("loaded %v, diagnostics %v", p, diags)
		}
		if got := diags.Errors()[0].String(); !strings.HasPrefix(got, "testdata/broken.yaml:7:") || !strings.Contains(got, "nosuch") {
			t.Errorf("diagnostic %q", got)
		}
	})
}

// The façade end to end, with the real Docker Engine and the repo's file
// adapter: a deploy creates the plug directory, applies, and returns the
// outputs; a deploy whose secrets the state could not encrypt is refused
// before anything exists; a destroy removes everything.
func TestRunThroughTheFacade(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	image := testimage.Image(t, ctx, "./cmd/file-adapter", fileAdapterName)
	labels := testimage.Labels(t)
	stateDir := t.TempDir()
	open := func(p *Project, app string) (*Session, *[]string) {
		t.Helper()
		st, err := state.NewFileStore(stateDir, state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var notes []string
		s, err := Open(ctx, Options{Project: p, App: app, Store: st, Version: "test", Labels: labels, CallTimeout: time.Minute,
			Info: func(m string) { notes = append(notes, m) }, Warn: func(m string) { notes = append(notes, m) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, &notes
	}

	path := workdir(t, "files.yaml", image, nil)
	out := filepath.Join(filepath.Dir(path), "out")
	s, notes := open(load(t, path, secret.NewRedactor()), "")
	res, err := s.Run(ctx, Run{Mode: plan.Deploy})
	if err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if len(*notes) == 0 || !strings.Contains((*notes)[0], "created the plug directory") {
		t.Errorf("notes %q", *notes)
	}
	sum := sha256.Sum256([]byte("listen = 8080\n"))
	if got, _ := os.ReadFile(filepath.Join(out, "app.conf.sha256")); string(got) != hex.EncodeToString(sum[:])+"  app.conf\n" {
		t.Errorf("app.conf.sha256 holds %q", got)
	}
	if res.Outcome == nil || res.Outcome.Plan.Summary.Create != 2 {
		t.Errorf("outcome %+v", res.Outcome)
	}
	if v := res.Outputs.Values; v["config_sha256"] != hex.EncodeToString(sum[:]) || v["checksum_path"] != "app.conf.sha256" || len(res.Outputs.Missing) > 0 || res.Outputs.Err != nil {
		t.Errorf("outputs %+v", res.Outputs)
	}

	// A second application whose config holds a secret, without a key.
	spath := workdir(t, "secret.yaml", image, map[string]string{"token.txt": "tok-4711"})
	ss, _ := open(load(t, spath, secret.NewRedactor()), "")
	_, err = ss.Run(ctx, Run{Mode: plan.Deploy})
	var mk *MissingKeyError
	if !errors.As(err, &mk) || len(mk.Secrets) != 1 || mk.Secrets[0] != "token" {
		t.Fatalf("deploy with a secret and no key: %v", err)
	}
	if doc, err := ss.Store.Load(ctx, "projectsecret"); err != nil || doc.Lineage != "" || len(doc.Resources) > 0 {
		t.Errorf("the refused deploy left a state: %+v, %v", doc, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(spath), "out")); !os.IsNotExist(err) {
		t.Errorf("the refused deploy created its plug directory: %v", err)
	}
	// A plan writes nothing, so it needs no key.
	if _, err := ss.Run(ctx, Run{Mode: plan.Deploy, PlanOnly: true}); err != nil {
		t.Errorf("plan with a secret and no key: %v", err)
	}

	// Without the descriptor there is nothing to deploy.
	bare, _ := open(nil, "projecttest")
	if _, err := bare.Run(ctx, Run{Mode: plan.Deploy}); err == nil || !strings.Contains(err.Error(), "needs its descriptor") {
		t.Errorf("a deploy without a descriptor: %v", err)
	}
	if _, err := s.Run(ctx, Run{Mode: plan.Destroy}); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if left, _ := os.ReadDir(out); len(left) != 0 {
		t.Errorf("left after destroy: %v", left)
	}
}
