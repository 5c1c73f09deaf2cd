// Command kv-deployster is a third-party adapter written only from the
// Deployster contract (docs/protocol.md and the 2018 Deployster schemas): it
// knows nothing of gcompose and imports nothing but the Go standard library.
//
// A resource is one entry of a JSON object kept in a file of the "kv" plug:
//
//	config: {file: settings.json, key: greeting, value: hello}
//
// Calls, each a separate run of the image:
//
//	kv-deployster              init: plugs, config_schema, state_action
//	kv-deployster state        VALID when the entry holds the value, else STALE
//	kv-deployster action set   writes the entry (read, modify, rename into place)
//
// It is strict on purpose: a request carrying a member the 2018 contract
// does not define (such as gcompose's extension) is refused, which proves
// that gcompose talks to it exactly as Deployster did.
//
// Deployster has no destroy: an entry, once written, stays.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// plugPath is where the "kv" plug is mounted.
const plugPath = "/kv"

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kv-deployster:", err)
		os.Exit(1)
	}
}

// request is the Deployster request: init's members, plus config (state,
// action) and staleState (action).
type request struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Version    string         `json:"version"`
	Verbose    bool           `json:"verbose"`
	Workspace  string         `json:"workspace"`
	Config     *config        `json:"config"`
	StaleState map[string]any `json:"staleState"`
}

type config struct {
	File  string `json:"file"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// deploysterMembers are the only request members of the 2018 contract.
var deploysterMembers = map[string]bool{
	"name": true, "type": true, "version": true, "verbose": true, "workspace": true,
	"config": true, "staleState": true,
}

var fileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*\.json$`)

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	raw, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return fmt.Errorf("request is not a JSON object: %w", err)
	}
	for k := range members {
		if !deploysterMembers[k] {
			return fmt.Errorf("request member %q is not part of the Deployster contract", k)
		}
	}
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("decode request: %w", err)
	}
	switch {
	case len(args) == 0:
		return writeJSON(stdout, initAnswer())
	case len(args) == 1 && args[0] == "state":
		cfg, err := checked(req)
		if err != nil {
			return err
		}
		return state(cfg, stdout)
	case len(args) == 2 && args[0] == "action" && args[1] == "set":
		cfg, err := checked(req)
		if err != nil {
			return err
		}
		return set(req.Name, cfg, stdout)
	default:
		return fmt.Errorf("unknown invocation %q", args)
	}
}

func initAnswer() map[string]any {
	return map[string]any{
		"plugs": map[string]any{
			"kv": map[string]any{"container_path": plugPath, "optional": false, "writable": true},
		},
		"config_schema": map[string]any{
			"type":                 "object",
			"required":             []string{"file", "key", "value"},
			"additionalProperties": false,
			"properties": map[string]any{
				"file":  map[string]any{"type": "string", "pattern": fileName.String()},
				"key":   map[string]any{"type": "string", "minLength": 1},
				"value": map[string]any{"type": "string"},
			},
		},
		"state_action": map[string]any{"args": []string{"state"}},
	}
}

// checked returns the config, re-checking what the schema already said (an
// adapter must not trust a path it is given).
func checked(req request) (config, error) {
	if req.Config == nil {
		return config{}, errors.New("request has no config")
	}
	c := *req.Config
	if !fileName.MatchString(c.File) {
		return config{}, fmt.Errorf("file %q: want a plain name ending in .json", c.File)
	}
	if c.Key == "" {
		return config{}, errors.New("key is empty")
	}
	return c, nil
}

func load(file string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(plugPath, file))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	entries := map[string]string{}
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%s is not a JSON object of strings: %w", file, err)
	}
	return entries, nil
}

func state(c config, stdout io.Writer) error {
	entries, err := load(c.File)
	if err != nil {
		return err
	}
	current, ok := entries[c.Key]
	if ok && current == c.Value {
		return writeJSON(stdout, map[string]any{
			"status": "VALID",
			"state":  map[string]any{"file": c.File, "key": c.Key, "value": current, "entries": len(entries)},
		})
	}
	desc := fmt.Sprintf("set %s in %s", c.Key, c.File)
	stale := map[string]any{"present": ok}
	if ok {
		stale["previous"] = current
		desc = fmt.Sprintf("change %s in %s from %q", c.Key, c.File, current)
	}
	return writeJSON(stdout, map[string]any{
		"status":     "STALE",
		"staleState": stale,
		"actions": []any{map[string]any{
			"name": "set", "description": desc, "args": []string{"action", "set"},
		}},
	})
}

func set(name string, c config, stdout io.Writer) error {
	entries, err := load(c.File)
	if err != nil {
		return err
	}
	entries[c.Key] = c.Value
	raw, err := json.MarshalIndent(entries, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(plugPath, "."+c.File+".*")
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
	if err := os.Rename(tmp.Name(), filepath.Join(plugPath, c.File)); err != nil {
		return err
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	_, err = fmt.Fprintf(stdout, "%s: %s now holds %s=%q (keys: %v)\n", name, c.File, c.Key, c.Value, keys)
	return err
}

func writeJSON(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}
