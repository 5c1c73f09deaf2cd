// Command named-files is a third-party adapter written only from the
// Deployster contract, as many Deployster adapters were: it names what it
// makes after the request's name, the resource's key in the manifest. A
// resource is the file <name>.txt in the "out" plug holding config.content.
//
// It also keeps every request it receives, byte for byte, in
// out/requests/<name>.<call>.<n>.json, so a test can compare what gcompose
// sends with what Deployster sends.
//
// Calls, each a separate run of the image:
//
//	named-files                 init: plugs, config_schema, state_action
//	named-files state           VALID when <name>.txt holds the content, else STALE
//	named-files action write    writes <name>.txt
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
	"strconv"
)

const outPath = "/out"

// A name becomes a file name: the key of a manifest entry is safe, an
// address with dots and brackets is too, anything else is refused.
var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._\[\]-]*$`)

type request struct {
	Name   string `json:"name"`
	Config struct {
		Content string `json:"content"`
	} `json:"config"`
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "named-files:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	raw, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		return fmt.Errorf("decode request: %w", err)
	}
	if !safeName.MatchString(req.Name) {
		return fmt.Errorf("name %q cannot name a file", req.Name)
	}
	call := "init"
	if len(args) > 0 {
		call = args[0]
	}
	if len(args) > 1 {
		call += "-" + args[1]
	}
	if call != "init" { // init has no plug mounted
		if err := keep(req.Name, call, raw); err != nil {
			return err
		}
	}
	file := filepath.Join(outPath, req.Name+".txt")
	switch call {
	case "init":
		return writeJSON(stdout, map[string]any{
			"plugs":         map[string]any{"out": map[string]any{"container_path": outPath}},
			"config_schema": map[string]any{"type": "object", "required": []string{"content"}, "properties": map[string]any{"content": map[string]any{"type": "string"}}},
			"state_action":  map[string]any{"args": []string{"state"}},
		})
	case "state":
		got, err := os.ReadFile(file)
		if err == nil && string(got) == req.Config.Content {
			return writeJSON(stdout, map[string]any{"status": "VALID", "state": map[string]any{"file": req.Name + ".txt"}})
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return writeJSON(stdout, map[string]any{
			"status": "STALE", "staleState": map[string]any{"exists": err == nil},
			"actions": []any{map[string]any{"name": "write", "description": "write " + req.Name + ".txt", "args": []string{"action", "write"}}},
		})
	case "action-write":
		return os.WriteFile(file, []byte(req.Config.Content), 0o644)
	default:
		return fmt.Errorf("unknown invocation %q", args)
	}
}

// keep stores one request as received.
func keep(name, call string, raw []byte) error {
	dir := filepath.Join(outPath, "requests")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	for n := 0; ; n++ {
		f, err := os.OpenFile(filepath.Join(dir, name+"."+call+"."+strconv.Itoa(n)+".json"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = f.Write(raw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
}

func writeJSON(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}
