// Command counter is a third-party adapter written only from docs/protocol.md
// (gcompose protocol 1) with nothing but the Go standard library. It opts in
// to the gcompose extension and uses it: destroy, change kinds, forced
// rebuilds, identity lines, persisted state and the application name.
//
// A resource is one counter file in the "counters" plug:
//
//	config: {file: hits.count, value: 3, label: "anything"}
//
// The file holds JSON: the value and label asked for, plus an id drawn when
// the file is created and the application that owns it. The id is the
// resource's identifying attribute: it is reported with an identity line as
// soon as the file exists, and comes back in persisted.identity.
//
// Calls, each a separate run of the image:
//
//	counter                  init
//	counter state            VALID, or STALE with change create|update|rebuild|delete
//	counter action create    write the file (keeps the id of a file already there)
//	counter action update    rewrite value and label, keep the id
//	counter action delete    remove the file named by staleState.remove
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// protocolVersion is the gcompose protocol version this adapter speaks.
const protocolVersion = 1

// plugPath is where the "counters" plug is mounted.
const plugPath = "/counters"

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "counter:", err)
		os.Exit(1)
	}
}

type request struct {
	Name       string      `json:"name"`
	Verbose    bool        `json:"verbose"`
	Config     *config     `json:"config"`
	StaleState staleState  `json:"staleState"`
	Gcompose   *requestExt `json:"gcompose"`
}

type config struct {
	File  string `json:"file"`
	Value int64  `json:"value"`
	Label string `json:"label"`
}

type staleState struct {
	Remove string `json:"remove,omitempty"`
}

type requestExt struct {
	Protocol  int        `json:"protocol"`
	App       string     `json:"app"`
	Call      string     `json:"call"`
	Action    string     `json:"action"`
	Desired   string     `json:"desired"`
	Persisted *persisted `json:"persisted"`
}

type persisted struct {
	State    map[string]any `json:"state"`
	Identity identity       `json:"identity"`
	Config   *config        `json:"config"`
}

// identity is what identifies a counter: its file and the id drawn at creation.
type identity struct {
	File string `json:"file,omitempty"`
	ID   string `json:"id,omitempty"`
}

// content is what a counter file holds.
type content struct {
	ID    string `json:"id"`
	App   string `json:"app,omitempty"`
	Value int64  `json:"value"`
	Label string `json:"label"`
}

var fileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var req request
	raw, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("decode request: %w", err)
	}
	if len(args) == 0 {
		return writeJSON(stdout, initAnswer())
	}
	ext := req.Gcompose
	if ext == nil {
		// A plain Deployster engine: no destroy, no memory. Still works.
		ext = &requestExt{Protocol: protocolVersion}
	}
	if ext.Protocol < protocolVersion {
		return fmt.Errorf("gcompose speaks protocol %d, this adapter speaks %d: upgrade gcompose", ext.Protocol, protocolVersion)
	}
	if ext.Persisted == nil {
		ext.Persisted = &persisted{}
	}
	if req.Config == nil {
		return errors.New("request has no config")
	}
	if !fileName.MatchString(req.Config.File) {
		return fmt.Errorf("file %q: want a plain file name", req.Config.File)
	}
	if req.Verbose {
		fmt.Fprintf(stderr, "%s: %v call, desired %q, persisted identity %+v\n", req.Name, args, ext.Desired, ext.Persisted.Identity)
	}
	switch {
	case len(args) == 1 && args[0] == "state":
		return state(req, ext, stdout)
	case len(args) == 2 && args[0] == "action":
		if ext.Action != "" && ext.Action != args[1] {
			return fmt.Errorf("run as action %q but the request says %q", args[1], ext.Action)
		}
		switch args[1] {
		case "create":
			return create(req, ext, stdout)
		case "update":
			return update(req, ext, stdout)
		case "delete":
			return remove(req, stdout)
		}
	}
	return fmt.Errorf("unknown invocation %q", args)
}

func initAnswer() map[string]any {
	return map[string]any{
		"plugs": map[string]any{
			"counters": map[string]any{"container_path": plugPath, "writable": true},
		},
		"config_schema": map[string]any{
			"type":                 "object",
			"required":             []string{"file", "value"},
			"additionalProperties": false,
			"properties": map[string]any{
				"file":  map[string]any{"type": "string", "pattern": fileName.String()},
				"value": map[string]any{"type": "integer"},
				"label": map[string]any{"type": "string"},
			},
		},
		"state_action": map[string]any{"args": []string{"state"}},
		"gcompose":     map[string]any{"protocol": protocolVersion},
	}
}

// read returns the counter in file, or nil when there is none.
func read(file string) (*content, error) {
	raw, err := os.ReadFile(filepath.Join(plugPath, file))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c content
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s is not a counter file: %w", file, err)
	}
	return &c, nil
}

// ours tells whether a counter file belongs to this resource: same
// application and, when gcompose remembers one, the id it was told.
func ours(c *content, ext *requestExt) bool {
	if ext.App != "" && c.App != "" && c.App != ext.App {
		return false
	}
	return ext.Persisted.Identity.ID == "" || c.ID == ext.Persisted.Identity.ID
}

func action(name, desc string) map[string]any {
	return map[string]any{"name": name, "description": desc, "args": []string{"action", name}}
}

func stale(stale staleState, change, reason string, forces []string, actions ...map[string]any) map[string]any {
	ext := map[string]any{"change": change, "reason": reason}
	if forces != nil {
		ext["forces"] = forces
	}
	if change == "create" || change == "rebuild" {
		ext["unknown"] = []string{"/id"}
	}
	return map[string]any{"status": "STALE", "staleState": stale, "actions": actions, "gcompose": ext}
}

func state(req request, ext *requestExt, stdout io.Writer) error {
	cfg := req.Config
	known := ext.Persisted.Identity
	if ext.Desired == "absent" {
		// Destroy what we made: the file gcompose remembers, else the config's.
		file := known.File
		if file == "" {
			file = cfg.File
		}
		cur, err := read(file)
		if err != nil {
			return err
		}
		if cur == nil {
			return writeJSON(stdout, map[string]any{"status": "VALID", "state": map[string]any{}})
		}
		if !ours(cur, ext) {
			return fmt.Errorf("%s has id %s of app %q, not the counter this resource made (%s): refusing to delete it", file, cur.ID, cur.App, known.ID)
		}
		return writeJSON(stdout, stale(staleState{Remove: file}, "delete", file+" exists", nil,
			action("delete", "delete "+file)))
	}

	if known.File != "" && known.File != cfg.File {
		old, err := read(known.File)
		if err != nil {
			return err
		}
		if old != nil && ours(old, ext) {
			return writeJSON(stdout, stale(staleState{Remove: known.File}, "rebuild",
				fmt.Sprintf("file changed from %s to %s", known.File, cfg.File), []string{"/file"},
				action("delete", "delete "+known.File), action("create", "create "+cfg.File)))
		}
	}
	cur, err := read(cfg.File)
	if err != nil {
		return err
	}
	if cur == nil {
		return writeJSON(stdout, stale(staleState{}, "create", cfg.File+" does not exist", nil,
			action("create", "create "+cfg.File)))
	}
	if ext.App != "" && cur.App != "" && cur.App != ext.App {
		return fmt.Errorf("%s belongs to app %q, not %q", cfg.File, cur.App, ext.App)
	}
	id := map[string]any{"file": cfg.File, "id": cur.ID}
	if cur.Value != cfg.Value || cur.Label != cfg.Label {
		reason := fmt.Sprintf("value %d, label %q; want %d, %q", cur.Value, cur.Label, cfg.Value, cfg.Label)
		if p := ext.Persisted.Config; p != nil && (p.Value != cur.Value || p.Label != cur.Label) {
			reason += " (changed outside gcompose since the last deploy)"
		}
		answer := stale(staleState{}, "update", reason, nil, action("update", "update "+cfg.File))
		answer["gcompose"].(map[string]any)["identity"] = id
		return writeJSON(stdout, answer)
	}
	return writeJSON(stdout, map[string]any{
		"status":   "VALID",
		"state":    map[string]any{"file": cfg.File, "value": cur.Value, "label": cur.Label, "id": cur.ID},
		"gcompose": map[string]any{"identity": id},
	})
}

func create(req request, ext *requestExt, stdout io.Writer) error {
	cfg := req.Config
	cur, err := read(cfg.File)
	if err != nil {
		return err
	}
	c := content{App: ext.App, Value: cfg.Value, Label: cfg.Label}
	if cur != nil && (ext.App == "" || cur.App == ext.App) {
		// A run killed after the write: the file is ours, keep its id.
		c.ID = cur.ID
	} else if cur != nil {
		return fmt.Errorf("%s belongs to app %q", cfg.File, cur.App)
	} else {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		c.ID = hex.EncodeToString(b[:])
	}
	if err := write(cfg.File, c); err != nil {
		return err
	}
	idLine, err := json.Marshal(identity{File: cfg.File, ID: c.ID})
	if err != nil {
		return err
	}
	// Report the identity at once, before anything else can fail.
	fmt.Fprintf(stdout, "gcompose:identity %s\n", idLine)
	_, err = fmt.Fprintf(stdout, "created %s = %d (id %s)\n", cfg.File, c.Value, c.ID)
	return err
}

func update(req request, ext *requestExt, stdout io.Writer) error {
	cfg := req.Config
	cur, err := read(cfg.File)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%s disappeared since the state call", cfg.File)
	}
	old := cur.Value
	cur.Value, cur.Label = cfg.Value, cfg.Label
	if cur.App == "" {
		cur.App = ext.App
	}
	if err := write(cfg.File, *cur); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "updated %s: %d -> %d\n", cfg.File, old, cur.Value)
	return err
}

func remove(req request, stdout io.Writer) error {
	file := req.StaleState.Remove
	if file == "" {
		file = req.Config.File
	}
	if !fileName.MatchString(file) {
		return fmt.Errorf("staleState.remove %q: not a plain file name", file)
	}
	err := os.Remove(filepath.Join(plugPath, file))
	if errors.Is(err, fs.ErrNotExist) {
		_, err = fmt.Fprintf(stdout, "%s was already gone\n", file)
		return err
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "deleted %s\n", file)
	return err
}

func write(file string, c content) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(plugPath, "."+file+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(plugPath, file))
}

func writeJSON(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}
