package file_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/file"
	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

type call struct {
	args      []string
	config    map[string]any
	desired   string
	persisted *protocol.Persisted
	stale     json.RawMessage
	plain     bool // no gcompose member: a plain Deployster engine
	replace   bool // plan's question about a resource it will remove and create anew
	cbd       bool // create_before_destroy asked
}

// run feeds one request to the adapter in-process, as a container would get it.
func run(t *testing.T, dir string, c call) (code int, stdout, stderr string) {
	t.Helper()
	req := protocol.Request{Name: "f", Type: "gcompose/file-adapter:dev", Version: "test", Workspace: "/w",
		Config: c.config, StaleState: c.stale,
		Gcompose: &protocol.RequestExt{Protocol: protocol.Version, Call: protocol.CallState, Desired: c.desired, Persisted: c.persisted, Replace: c.replace, CreateBeforeDestroy: c.cbd}}
	if len(c.args) == 2 {
		req.Gcompose.Call, req.Gcompose.Action = protocol.CallAction, c.args[1]
	}
	if c.plain {
		req.Gcompose = nil
	}
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code = sdk.Run(t.Context(), file.New(dir), c.args, bytes.NewReader(raw), &out, &errb)
	return code, out.String(), errb.String()
}

func state(t *testing.T, dir string, c call) protocol.StateResult {
	t.Helper()
	c.args = []string{"state"}
	code, out, errOut := run(t, dir, c)
	if code != 0 {
		t.Fatalf("state exited %d: %s", code, errOut)
	}
	var r protocol.StateResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("state answer %q: %v", out, err)
	}
	return r
}

// converge runs the state call, the actions it asks for, and the state call
// again, as the engine does; it returns the final answer and the actions' stdout.
func converge(t *testing.T, dir string, c call) (protocol.StateResult, string) {
	t.Helper()
	r := state(t, dir, c)
	var text strings.Builder
	for _, a := range r.Actions {
		ac := c
		ac.args, ac.stale = a.Args, r.StaleState
		code, out, errOut := run(t, dir, ac)
		if code != 0 {
			t.Fatalf("action %s exited %d: %s", a.Name, code, errOut)
		}
		text.WriteString(out)
	}
	final := state(t, dir, c)
	if final.Status != protocol.Valid {
		t.Fatalf("after actions: %+v, want VALID", final)
	}
	return final, text.String()
}

func TestInit(t *testing.T) {
	code, out, errOut := run(t, t.TempDir(), call{})
	if code != 0 {
		t.Fatal(errOut)
	}
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.ValidateInitResult([]byte(out)); err != nil {
		t.Fatal(err)
	}
	golden.CheckString(t, "testdata/init.golden", out)
	var ir protocol.InitResult
	if err := json.Unmarshal([]byte(out), &ir); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		config  map[string]any
		wantErr bool
	}{
		{map[string]any{"path": "a.txt"}, false},
		{map[string]any{"path": "d/e/.hidden..x", "content": "x", "mode": "0600", "delay_ms": 5, "fail": "no"}, false},
		{map[string]any{"path": "..x/a"}, false},
		{map[string]any{}, true},
		{map[string]any{"path": "/etc/passwd"}, true},
		{map[string]any{"path": "../a"}, true},
		{map[string]any{"path": "a/../../b"}, true},
		{map[string]any{"path": "a/./b"}, true},
		{map[string]any{"path": "a//b"}, true},
		{map[string]any{"path": "a/"}, true},
		{map[string]any{"path": "a", "mode": "0999"}, true},
		{map[string]any{"path": "a", "mode": "rw"}, true},
		{map[string]any{"path": "a", "delay_ms": -1}, true},
		{map[string]any{"path": "a", "colour": "red"}, true},
	} {
		err := v.ValidateConfig(ir.ConfigSchema, tt.config)
		if (err != nil) != tt.wantErr {
			t.Errorf("config %v: err = %v, want error %v", tt.config, err, tt.wantErr)
		}
	}
}

func TestStateAnswers(t *testing.T) {
	type file struct {
		content string
		mode    fs.FileMode
	}
	tests := []struct {
		name        string
		files       map[string]file
		c           call
		wantStatus  string
		wantChange  string
		wantActions string // names, comma separated
	}{
		{"missing", nil, call{config: map[string]any{"path": "a.txt", "content": "hi"}}, "STALE", "create", "create"},
		{"same", map[string]file{"a.txt": {"hi", 0o644}}, call{config: map[string]any{"path": "a.txt", "content": "hi"}}, "VALID", "", ""},
		{"content differs", map[string]file{"a.txt": {"ho", 0o644}}, call{config: map[string]any{"path": "a.txt", "content": "hi"}}, "STALE", "update", "update"},
		{"mode differs", map[string]file{"a.txt": {"hi", 0o600}}, call{config: map[string]any{"path": "a.txt", "content": "hi"}}, "STALE", "update", "chmod"},
		{"path changed", map[string]file{"old.txt": {"hi", 0o644}}, call{config: map[string]any{"path": "new.txt", "content": "hi"},
			persisted: &protocol.Persisted{State: map[string]any{"path": "old.txt"}}}, "STALE", "rebuild", "remove-old,create"},
		// create_before_destroy: the new file is written before the old goes.
		{"path changed, create before destroy", map[string]file{"old.txt": {"hi", 0o644}}, call{config: map[string]any{"path": "new.txt", "content": "hi"},
			persisted: &protocol.Persisted{State: map[string]any{"path": "old.txt"}}, cbd: true}, "STALE", "rebuild", "create,remove-old"},
		{"path changed, old gone", nil, call{config: map[string]any{"path": "new.txt", "content": "hi"},
			persisted: &protocol.Persisted{Config: map[string]any{"path": "old.txt"}}}, "STALE", "create", "create"},
		{"absent, exists", map[string]file{"a.txt": {"hi", 0o644}}, call{config: map[string]any{"path": "a.txt"}, desired: "absent"}, "STALE", "delete", "delete"},
		{"absent, gone", nil, call{config: map[string]any{"path": "a.txt"}, desired: "absent"}, "VALID", "", ""},
		{"deployster engine (no gcompose member)", nil, call{config: map[string]any{"path": "a.txt"}, plain: true}, "STALE", "create", "create"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for p, f := range tt.files {
				full := filepath.Join(dir, p)
				if err := os.WriteFile(full, []byte(f.content), f.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(full, f.mode); err != nil {
					t.Fatal(err)
				}
			}
			r := state(t, dir, tt.c)
			if r.Status != tt.wantStatus {
				t.Fatalf("status %s, want %s (%+v)", r.Status, tt.wantStatus, r)
			}
			var change string
			if r.Gcompose != nil {
				change = r.Gcompose.Change
			}
			if change != tt.wantChange {
				t.Errorf("change %q, want %q", change, tt.wantChange)
			}
			var names []string
			for _, a := range r.Actions {
				names = append(names, a.Name)
			}
			if got := strings.Join(names, ","); got != tt.wantActions {
				t.Errorf("actions %s, want %s", got, tt.wantActions)
			}
		})
	}
}

// Asked what a replaced file will be (protocol RequestExt.Replace), the
// adapter plans every output from the config, without reading the file
// that is about to go; the create after the removal leaves exactly that.
func TestReplacePlansWhatTheCreateLeaves(t *testing.T) {
	for _, tt := range []struct {
		name   string
		config map[string]any
	}{
		{"default mode", map[string]any{"path": "a.txt", "content": "hi"}},
		{"mode and markup", map[string]any{"path": "d/b.html", "content": "<p>a & b</p>\n", "mode": "0600"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			first, _ := converge(t, dir, call{config: tt.config})
			r := state(t, dir, call{config: tt.config, replace: true})
			if r.Status != protocol.Stale || r.Gcompose == nil || r.Gcompose.Change != protocol.ChangeCreate {
				t.Fatalf("replace answer %+v: want STALE create, although the file is as wanted", r)
			}
			// apply removes it, then creates it anew.
			if err := os.Remove(filepath.Join(dir, tt.config["path"].(string))); err != nil {
				t.Fatal(err)
			}
			final, _ := converge(t, dir, call{config: tt.config})
			if len(r.Gcompose.Planned) != len(final.State) {
				t.Errorf("planned %v, want every output of %v", r.Gcompose.Planned, final.State)
			}
			for ptr, v := range r.Gcompose.Planned {
				if got := final.State[strings.TrimPrefix(ptr, "/")]; got != v {
					t.Errorf("planned %s = %v, the create left %v", ptr, v, got)
				}
			}
			if first.State["sha256"] != final.State["sha256"] {
				t.Errorf("sha256 %v then %v", first.State["sha256"], final.State["sha256"])
			}
		})
	}
}

// TestLifecycle deploys, re-deploys, updates, moves and destroys one file,
// checking the directory after each step.
func TestLifecycle(t *testing.T) {
	dir := t.TempDir()
	cfg := map[string]any{"path": "sub/a.txt", "content": "one\n"}

	st, out := converge(t, dir, call{config: cfg})
	if !strings.Contains(out, protocol.IdentityPrefix+`{"path":"sub/a.txt"}`) {
		t.Errorf("create did not report its identity: %q", out)
	}
	assertFile(t, dir, "sub/a.txt", "one\n", 0o644)
	if st.State["size"] != 4.0 || st.State["content"] != "one\n" || st.State["mode"] != "0644" || st.State["sha256"] == "" {
		t.Errorf("state %v", st.State)
	}

	if r := state(t, dir, call{config: cfg}); r.Status != protocol.Valid {
		t.Fatalf("re-deploy: %+v, want VALID", r)
	}

	cfg2 := map[string]any{"path": "sub/a.txt", "content": "two\n", "mode": "0600"}
	converge(t, dir, call{config: cfg2})
	assertFile(t, dir, "sub/a.txt", "two\n", 0o600)

	cfg3 := map[string]any{"path": "b.txt", "content": "two\n", "mode": "600"}
	converge(t, dir, call{config: cfg3, persisted: &protocol.Persisted{State: st.State, Config: cfg2}})
	assertFile(t, dir, "b.txt", "two\n", 0o600)
	if _, err := os.Stat(filepath.Join(dir, "sub/a.txt")); !os.IsNotExist(err) {
		t.Errorf("old file still there after the move: %v", err)
	}

	converge(t, dir, call{config: cfg3, desired: protocol.Absent})
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("file still there after destroy: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".gcompose-") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestActionFailAndDelay(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	code, out, errOut := run(t, dir, call{args: []string{"action", "create"},
		config: map[string]any{"path": "a", "content": "x", "delay_ms": 50, "fail": "disk on fire"}})
	if code == 0 || !strings.Contains(errOut, "failing on demand: disk on fire") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("action returned after %v, before its delay", d)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("a failing action wrote the file")
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		c       call
		wantErr string
	}{
		{"directory", call{args: []string{"state"}, config: map[string]any{"path": "d"}}, "not a regular file"},
		{"symlink out of the plug", call{args: []string{"state"}, config: map[string]any{"path": "escape"}}, "escape"},
		{"bad path", call{args: []string{"state"}, config: map[string]any{"path": "../x"}}, "relative path"},
		{"bad stale path", call{args: []string{"action", "remove-old"}, config: map[string]any{"path": "x"},
			stale: json.RawMessage(`{"remove":["../../etc/passwd"]}`)}, "refusing to delete"},
		{"no plug", call{args: []string{"state"}, config: map[string]any{"path": "x"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := dir
			if tt.name == "no plug" {
				d = filepath.Join(dir, "missing")
				tt.wantErr = "open the files plug"
			}
			code, _, errOut := run(t, d, tt.c)
			if code == 0 || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tt.wantErr)
			}
		})
	}
}

func assertFile(t *testing.T, dir, p, content string, mode fs.FileMode) {
	t.Helper()
	full := filepath.Join(dir, p)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(full)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != content || fi.Mode().Perm() != mode {
		t.Errorf("%s: %q %04o, want %q %04o", p, data, fi.Mode().Perm(), content, mode)
	}
}
