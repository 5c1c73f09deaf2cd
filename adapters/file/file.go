// Package file is a generic adapter with a visible effect: each resource is
// one file in the plug directory "files" (mounted at /files), with a given
// content and mode. It creates, updates, moves (rebuild, when the path
// changes) and deletes the file; delay_ms and fail make its actions slow or
// failing on demand for the engine's tests and benchmarks. Its main is
// cmd/file-adapter; its image gcompose/file-adapter:dev.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// ContainerPath is where the "files" plug is mounted in the container.
const ContainerPath = "/files"

// Plug is the name of the plug the adapter needs.
const Plug = "files"

// DefaultMode is the mode of a file whose config gives none.
const DefaultMode = "0644"

// Action names.
const (
	ActCreate    = "create"
	ActUpdate    = "update"
	ActChmod     = "chmod"
	ActDelete    = "delete"
	ActRemoveOld = "remove-old"
)

// Config is a file resource's config.
type Config struct {
	// Path is relative to the plug directory, without "." or ".." segments.
	Path string `json:"path"`
	// Content is the file's whole content.
	Content string `json:"content"`
	// Mode is an octal permission string, DefaultMode when empty.
	Mode string `json:"mode,omitempty"`
	// DelayMS makes every action sleep that long first.
	DelayMS int `json:"delay_ms,omitempty"`
	// Fail, when not empty, makes every action fail with this message
	// (after the delay).
	Fail string `json:"fail,omitempty"`
	// Journal, when set, names a file (relative to the plug directory) to
	// which every action that changed something appends "ACTION PATH\n":
	// tests count creations with it to prove nothing is created twice.
	Journal string `json:"journal,omitempty"`
}

// segment is one path element other than "." and "..".
const segment = `(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)`

// pathPattern is a relative path without "." or ".." elements.
const pathPattern = `^` + segment + `(?:/` + segment + `)*$`

const modePattern = `^0?[0-7]{3}$`

// ConfigSchema is the config_schema of the init answer.
func ConfigSchema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["path"],
  "properties": {
    "path": {"type": "string", "pattern": "` + jsonEscape(pathPattern) + `", "description": "file path relative to the files plug, no . or .. elements"},
    "content": {"type": "string", "description": "the whole content of the file"},
    "mode": {"type": "string", "pattern": "` + modePattern + `", "description": "octal permissions, default ` + DefaultMode + `"},
    "delay_ms": {"type": "integer", "minimum": 0, "description": "every action sleeps this long first"},
    "fail": {"type": "string", "description": "every action fails with this message"},
    "journal": {"type": "string", "pattern": "` + jsonEscape(pathPattern) + `", "description": "append ACTION PATH to this file after every change (for tests)"}
  }
}`)
}

func jsonEscape(s string) string {
	raw, _ := json.Marshal(s)
	return string(raw[1 : len(raw)-1])
}

// New returns the adapter, managing files under root (ContainerPath in the
// image; a temporary directory in tests).
func New(root string) sdk.Adapter { return NewWith(root, Options{}) }

// Options are the adapter's opt-in behaviours.
type Options struct {
	// Sweep tags every file written and offers sweep (EnvSweep).
	Sweep bool
}

// NewWith returns the adapter with options.
func NewWith(root string, opt Options) sdk.Adapter {
	writable := true
	a := &adapter{root: root, pathRE: regexp.MustCompile(pathPattern), modeRE: regexp.MustCompile(modePattern), sweep: opt.Sweep}
	ad := sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			Plugs:        map[string]protocol.PlugSpec{Plug: {ContainerPath: ContainerPath, Writable: &writable}},
			ConfigSchema: ConfigSchema(),
			StateAction:  protocol.ActionSpec{Args: []string{sdk.StateArg}},
			// A new path is written before the old one is deleted when
			// asked (create_before_destroy): both files exist for a moment,
			// never neither.
			Gcompose: &protocol.InitExt{Protocol: protocol.Version, CreateBeforeDestroy: true, Outputs: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"},
					"sha256": map[string]any{"type": "string"}, "size": map[string]any{"type": "integer"},
					"mode": map[string]any{"type": "string"},
				},
			}},
		}),
		State: a.state,
		Actions: map[string]sdk.ActionFunc{
			ActCreate:    a.write,
			ActUpdate:    a.write,
			ActChmod:     a.chmod,
			ActDelete:    a.remove,
			ActRemoveOld: a.remove,
		},
	}
	if opt.Sweep {
		ad.Sweep = a.sweepFiles
	}
	return ad
}

type adapter struct {
	root   string
	pathRE *regexp.Regexp
	modeRE *regexp.Regexp
	sweep  bool
}

// staleState tells the actions what the state call found.
type staleState struct {
	// Remove lists the paths delete and remove-old remove.
	Remove []string `json:"remove,omitempty"`
}

// current is what exists at a path.
type current struct {
	exists bool
	data   []byte
	mode   fs.FileMode
}

func (a *adapter) config(req *sdk.Request) (Config, fs.FileMode, error) {
	var c Config
	if err := req.DecodeConfig(&c); err != nil {
		return c, 0, err
	}
	if !a.pathRE.MatchString(c.Path) {
		return c, 0, fmt.Errorf("path %q: want a relative path without . or .. elements", c.Path)
	}
	if c.Mode == "" {
		c.Mode = DefaultMode
	}
	m, err := a.parseMode(c.Mode)
	return c, m, err
}

func (a *adapter) parseMode(s string) (fs.FileMode, error) {
	if !a.modeRE.MatchString(s) {
		return 0, fmt.Errorf("mode %q: want octal permissions such as 0644", s)
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: %w", s, err)
	}
	return fs.FileMode(m), nil
}

func (a *adapter) open() (*os.Root, error) {
	r, err := os.OpenRoot(a.root)
	if err != nil {
		return nil, fmt.Errorf("open the %s plug: %w", Plug, err)
	}
	return r, nil
}

func (a *adapter) inspect(root *os.Root, p string) (current, error) {
	fi, err := root.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return current{}, nil
	}
	if err != nil {
		return current{}, fmt.Errorf("stat %s: %w", p, err)
	}
	if !fi.Mode().IsRegular() {
		return current{}, fmt.Errorf("%s exists and is not a regular file (%s)", p, fi.Mode().Type())
	}
	data, err := root.ReadFile(p)
	if err != nil {
		return current{}, fmt.Errorf("read %s: %w", p, err)
	}
	return current{exists: true, data: data, mode: fi.Mode().Perm()}, nil
}

// previousPath is where the resource's file was last put, when that is not
// where it must be now (the path changed: a rebuild).
func (a *adapter) previousPath(req *sdk.Request, now string) string {
	p := req.Persisted()
	for _, m := range []map[string]any{p.State, p.Identity, p.Config} {
		if s, ok := m["path"].(string); ok && s != "" && s != now && a.pathRE.MatchString(s) {
			return s
		}
	}
	return ""
}

func (a *adapter) state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	c, mode, err := a.config(req)
	if err != nil {
		return nil, err
	}
	if req.Replacing() && req.Desired() == protocol.Present {
		return replaced(c, mode)
	}
	root, err := a.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	cur, err := a.inspect(root, c.Path)
	if err != nil {
		return nil, err
	}

	var remove []string
	if old := a.previousPath(req, c.Path); old != "" {
		prev, err := a.inspect(root, old)
		if err != nil {
			return nil, err
		}
		if prev.exists {
			remove = append(remove, old)
		}
	}

	if req.Desired() == protocol.Absent {
		if cur.exists {
			remove = append(remove, c.Path)
		}
		if len(remove) == 0 {
			return &protocol.StateResult{Status: protocol.Valid, State: map[string]any{"path": c.Path}}, nil
		}
		return stale(remove, []protocol.ActionSpec{{Name: ActDelete, Description: "delete " + join(remove)}},
			&protocol.StateExt{Change: protocol.ChangeDelete, Reason: "the file must be gone"})
	}

	var actions []protocol.ActionSpec
	ext := &protocol.StateExt{}
	if len(remove) > 0 {
		actions = append(actions, protocol.ActionSpec{Name: ActRemoveOld, Description: "delete " + join(remove) + " (the path changed)"})
		ext.Change, ext.Forces, ext.Reason = protocol.ChangeRebuild, []string{"/path"}, "path changed from "+join(remove)
	}
	switch {
	case !cur.exists:
		actions = append(actions, protocol.ActionSpec{Name: ActCreate, Description: "create " + c.Path})
		if ext.Change == "" {
			ext.Change, ext.Reason = protocol.ChangeCreate, c.Path+" does not exist"
		}
	case string(cur.data) != c.Content:
		actions = append(actions, protocol.ActionSpec{Name: ActUpdate, Description: "write the new content of " + c.Path})
		if ext.Change == "" {
			ext.Change, ext.Reason = protocol.ChangeUpdate, "content differs"
		}
	case cur.mode != mode:
		actions = append(actions, protocol.ActionSpec{Name: ActChmod, Description: fmt.Sprintf("chmod %04o %s", mode, c.Path)})
		if ext.Change == "" {
			ext.Change, ext.Reason = protocol.ChangeUpdate, fmt.Sprintf("mode is %04o, want %04o", cur.mode, mode)
		}
	}
	if len(remove) > 0 && req.CreateBeforeDestroy() && len(actions) > 1 {
		// create_before_destroy: the new file first, then the old one goes.
		actions = append(actions[1:], actions[0])
		ext.Reason += " (the new file is written before the old one is deleted)"
	}
	if len(actions) > 0 {
		return stale(remove, actions, ext)
	}
	return &protocol.StateResult{
		Status:   protocol.Valid,
		State:    outputs(c.Path, cur.data, cur.mode),
		Gcompose: &protocol.StateExt{Identity: map[string]any{"path": c.Path}},
	}, nil
}

// outputs are a file's outputs (its VALID state).
func outputs(p string, data []byte, mode fs.FileMode) map[string]any {
	sum := sha256.Sum256(data)
	return map[string]any{
		"path":    p,
		"content": string(data),
		"sha256":  hex.EncodeToString(sum[:]),
		"size":    len(data),
		"mode":    fmt.Sprintf("%04o", mode),
	}
}

// replaced answers plan's question about a file that apply will delete and
// then create anew (protocol RequestExt.Replace): the create writes the
// config's content with its mode, so every output is known now. The disk
// is not read: the file there is about to go.
func replaced(c Config, mode fs.FileMode) (*protocol.StateResult, error) {
	planned := map[string]any{}
	for k, v := range outputs(c.Path, []byte(c.Content), mode) {
		planned["/"+k] = v
	}
	return stale(nil, []protocol.ActionSpec{{Name: ActCreate, Description: "create " + c.Path}},
		&protocol.StateExt{Change: protocol.ChangeCreate, Reason: "replaced: created anew", Planned: planned})
}

func stale(remove []string, actions []protocol.ActionSpec, ext *protocol.StateExt) (*protocol.StateResult, error) {
	ss, err := sdk.StaleState(staleState{Remove: remove})
	if err != nil {
		return nil, err
	}
	return &protocol.StateResult{Status: protocol.Stale, StaleState: ss, Actions: actions, Gcompose: ext}, nil
}

func join(paths []string) string { return strings.Join(paths, ", ") }

// prelude runs before every action: the configured delay, then the
// configured failure.
func (a *adapter) prelude(ctx context.Context, req *sdk.Request) (Config, fs.FileMode, error) {
	c, mode, err := a.config(req)
	if err != nil {
		return c, 0, err
	}
	if c.DelayMS > 0 {
		t := time.NewTimer(time.Duration(c.DelayMS) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return c, 0, ctx.Err()
		}
	}
	if c.Fail != "" {
		return c, 0, fmt.Errorf("failing on demand: %s", c.Fail)
	}
	return c, mode, nil
}

// write creates or replaces the file atomically (temporary file, rename).
func (a *adapter) write(ctx context.Context, req *sdk.Request) error {
	c, mode, err := a.prelude(ctx, req)
	if err != nil {
		return err
	}
	root, err := a.open()
	if err != nil {
		return err
	}
	defer root.Close()
	if dir := path.Dir(c.Path); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create directory %s: %w", dir, err)
		}
	}
	tmp := path.Join(path.Dir(c.Path), ".gcompose-"+path.Base(c.Path)+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	_, werr := f.WriteString(c.Content)
	if werr == nil {
		werr = f.Sync()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = root.Chmod(tmp, mode) // the umask may have narrowed it
	}
	if werr == nil {
		werr = root.Rename(tmp, c.Path)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("write %s: %w", c.Path, werr)
	}
	req.Printf("wrote %s (%d bytes, mode %04o)", c.Path, len(c.Content), mode)
	if err := a.tag(root, req, c.Path); err != nil {
		return err
	}
	if err := journal(root, c, req.Action, c.Path); err != nil {
		return err
	}
	return req.ReportIdentity(map[string]any{"path": c.Path})
}

func (a *adapter) chmod(ctx context.Context, req *sdk.Request) error {
	c, mode, err := a.prelude(ctx, req)
	if err != nil {
		return err
	}
	root, err := a.open()
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Chmod(c.Path, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", c.Path, err)
	}
	req.Printf("chmod %04o %s", mode, c.Path)
	return nil
}

// remove deletes the paths the state call listed (the configured path when
// it listed none); a path already gone is fine.
func (a *adapter) remove(ctx context.Context, req *sdk.Request) error {
	c, _, err := a.prelude(ctx, req)
	if err != nil {
		return err
	}
	var ss staleState
	if err := req.DecodeStaleState(&ss); err != nil {
		return err
	}
	if len(ss.Remove) == 0 && req.Action == ActDelete {
		ss.Remove = []string{c.Path}
	}
	root, err := a.open()
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range ss.Remove {
		if !a.pathRE.MatchString(p) {
			return fmt.Errorf("refusing to delete %q: not a relative path", p)
		}
		if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete %s: %w", p, err)
		}
		req.Printf("deleted %s", p)
		if err := a.untag(root, req, p); err != nil {
			return err
		}
		if err := journal(root, c, req.Action, p); err != nil {
			return err
		}
	}
	return nil
}

// journal appends "action path" to the configured journal file, if any.
func journal(root *os.Root, c Config, action, p string) error {
	if c.Journal == "" {
		return nil
	}
	f, err := root.OpenFile(c.Journal, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("journal %s: %w", c.Journal, err)
	}
	_, err = fmt.Fprintf(f, "%s %s\n", action, p)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("journal %s: %w", c.Journal, err)
	}
	return nil
}
