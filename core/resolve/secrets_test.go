package resolve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
)

const secretsDescriptor = `meta: {name: sec}
secrets:
  db_password: {env: DB_PASSWORD}
  api_key: {file: ./api.key}
  absent_env: {env: NOT_SET_ANYWHERE}
  absent_file: {file: ./missing.key}
resources:
  files:
    type: gcompose/file-adapter:dev
    config:
      path: a.txt
      content: "user:${secret.db_password} key=${secret.api_key}"
      again: ${secret.db_password}
`

func TestSecretRoot(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.yaml")
	os.WriteFile(path, []byte(secretsDescriptor), 0o644)
	os.WriteFile(filepath.Join(dir, "api.key"), []byte("k-123${x}\n"), 0o600)
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	env := func(k string) (string, bool) {
		if k == "DB_PASSWORD" {
			return "pw-456", true
		}
		return "", false
	}
	res, rd := Resolve(app, Options{Env: env, Outputs: testOutputs})
	if rd.HasErrors() {
		t.Fatal(rd)
	}
	cfg := res.Node("resources.files").Spec["config"].(map[string]any)
	// The spec is in template form: the "${" inside the file's value is escaped.
	if got := cfg["content"]; got != "user:pw-456 key=k-123$${x}" {
		t.Errorf("content = %q", got)
	}
	if cfg["again"] != "pw-456" {
		t.Errorf("again = %q", cfg["again"])
	}
	want := map[string]string{"db_password": "pw-456", "api_key": "k-123${x}"}
	if len(res.Secrets) != len(want) || res.Secrets["db_password"] != want["db_password"] || res.Secrets["api_key"] != want["api_key"] {
		t.Errorf("Secrets = %v, want %v (only the ones referenced)", res.Secrets, want)
	}
	// gcompose config prints where a secret comes from, never its value.
	canon, _ := descriptor.Canonical(app)
	if strings.Contains(string(canon), "pw-456") || strings.Contains(string(canon), "k-123") || !strings.Contains(string(canon), "${secret.db_password}") {
		t.Errorf("canonical form:\n%s", canon)
	}
}

func TestSecretRootErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.yaml")
	body := strings.Replace(secretsDescriptor, `again: ${secret.db_password}`,
		"e1: ${secret.absent_env}\n      e2: ${secret.absent_file}\n      e3: ${secret.nope}\n      e4: ${secret.db_password.x}", 1)
	os.WriteFile(path, []byte(body), 0o644)
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, path)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, rd := Resolve(app, Options{Env: func(string) (string, bool) { return "", false }})
	got := rd.Error()
	for _, want := range []string{
		"app.yaml:12:22: ${secret.db_password}: secret db_password",
		"environment variable DB_PASSWORD, which is not set (declared at " + path + ":3:",
		"environment variable NOT_SET_ANYWHERE, which is not set",
		"secret absent_file cannot be read from its file",
		`no secret named "nope" is declared`,
		"a secret reference is ${secret.NAME}",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
}

func TestSecretDeclarationChecks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.yaml")
	os.WriteFile(path, []byte("secrets:\n  both: {env: A, file: b}\n  none: {}\n  9bad: {env: B}\n"), 0o644)
	_, diags := descriptor.Load(context.Background(), descriptor.Options{}, path)
	os.WriteFile(path, []byte("secrets:\n  s: {value: x}\n"), 0o644)
	_, strict := descriptor.Load(context.Background(), descriptor.Options{}, path)
	got := diags.Error() + strict.Error()
	for _, want := range []string{"app.yaml:2:3: secret both: give exactly one", "secret none: give exactly one", `secret name "9bad"`, `unknown key "value"; allowed here: env, file`} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
}
