// Command testadapter is a small adapter image for the tests of the runner
// and the protocol client. With arguments it is a probe for the runner
// ("echo", "stderr N", "sleep D", "huge N", "exit C", "stdin-count",
// "probe"); without arguments it answers a Deployster init, and "state" /
// "action NAME" are its state and action calls. Its behaviour is chosen by
// the request: the resource name at init ("plain*": a Deployster-only
// adapter, "badproto*": protocol 99, "badinit*": an init answer of the wrong
// shape), config.mode on state calls ("garbage", "wrongschema", "exit",
// "hang", "huge", "echo").
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		initCall()
		return
	}
	switch args[0] {
	case "echo":
		io.Copy(os.Stdout, os.Stdin)
	case "stderr":
		n, _ := strconv.Atoi(arg(args, 1))
		for i := 0; i < n; i++ {
			fmt.Fprintf(os.Stderr, "line %d\n", i)
		}
		fmt.Fprint(os.Stderr, "no newline at end")
		fmt.Println("ok")
	case "sleep":
		d, _ := time.ParseDuration(arg(args, 1))
		fmt.Fprintln(os.Stderr, "going to sleep")
		time.Sleep(d)
	case "huge":
		n, _ := strconv.Atoi(arg(args, 1))
		huge(n)
	case "exit":
		c, _ := strconv.Atoi(arg(args, 1))
		fmt.Fprintln(os.Stderr, "something went wrong")
		fmt.Fprintln(os.Stderr, "giving up")
		os.Exit(c)
	case "stdin-count":
		n, err := io.Copy(io.Discard, os.Stdin)
		fmt.Printf("%d %v\n", n, err)
	case "probe":
		probe()
	case "state":
		stateCall()
	case "action":
		actionCall(arg(args, 1))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", args[0])
		os.Exit(2)
	}
}

func arg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func huge(n int) {
	w := bufio.NewWriter(os.Stdout)
	line := strings.Repeat("x", 1023) + "\n"
	for i := 0; i < n; i += len(line) {
		w.WriteString(line)
	}
	w.Flush()
}

// probe reports what the container may do, as JSON.
func probe() {
	out := map[string]any{}
	_, err := os.Create("/rootfs-write-test")
	out["rootfs_writable"] = err == nil
	_, err = os.Create("/tmp/tmp-write-test")
	out["tmp_writable"] = err == nil
	ifaces, _ := net.Interfaces()
	var names []string
	for _, i := range ifaces {
		names = append(names, i.Name)
	}
	out["interfaces"] = names
	out["uid"] = os.Getuid()
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "CapEff" || k == "NoNewPrivs") {
			out[k] = strings.TrimSpace(v)
		}
	}
	mounts := map[string]bool{}
	for _, p := range []string{"/data", "/ro", "/var/run/docker.sock"} {
		if _, err := os.Stat(p); err == nil {
			f, err := os.Create(filepath.Join(p, "w"))
			if err == nil {
				f.Close()
				os.Remove(filepath.Join(p, "w"))
			}
			mounts[p] = err == nil
		}
	}
	out["mounts"] = mounts
	json.NewEncoder(os.Stdout).Encode(out)
}

type request struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Version    string          `json:"version"`
	Verbose    bool            `json:"verbose"`
	Workspace  string          `json:"workspace"`
	Config     map[string]any  `json:"config"`
	StaleState json.RawMessage `json:"staleState"`
	Gcompose   map[string]any  `json:"gcompose"`
}

func readRequest() (request, json.RawMessage) {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("read stdin: %v", err)
	}
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		fail("stdin is not a request: %v: %q", err, raw)
	}
	return req, raw
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

func answer(v any) {
	if err := json.NewEncoder(os.Stdout).Encode(v); err != nil {
		fail("write answer: %v", err)
	}
}

func initCall() {
	req, _ := readRequest()
	fmt.Fprintf(os.Stderr, "init for %s\n", req.Name)
	res := map[string]any{
		"plugs": map[string]any{
			"data":   map[string]any{"container_path": "/data", "optional": true},
			"ro":     map[string]any{"container_path": "/ro", "optional": true, "writable": false},
			"needed": map[string]any{"container_path": "/needed", "optional": !strings.Contains(req.Name, "needplug")},
		},
		"config_schema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"mode":    map[string]any{"type": "string"},
				"content": map[string]any{"type": "string"},
				"count":   map[string]any{"type": "integer", "minimum": 0},
			},
		},
		"state_action": map[string]any{"args": []string{"state"}},
		"gcompose":     map[string]any{"protocol": 1},
	}
	switch {
	case strings.Contains(req.Name, "plain"):
		delete(res, "gcompose")
	case strings.Contains(req.Name, "badproto"):
		res["gcompose"] = map[string]any{"protocol": 99}
	case strings.Contains(req.Name, "badinit"):
		delete(res, "state_action")
	case strings.Contains(req.Name, "withenv"):
		res["gcompose"] = map[string]any{"protocol": 1, "env": []string{"TESTADAPTER_KEY", "TESTADAPTER_UNSET"}}
	case strings.Contains(req.Name, "garbageinit"):
		fmt.Println("hello, I am not JSON")
		return
	}
	answer(res)
}

func stateCall() {
	req, raw := readRequest()
	fmt.Fprintf(os.Stderr, "state for %s\n", req.Name)
	mode, _ := req.Config["mode"].(string)
	switch mode {
	case "garbage":
		fmt.Println("this is not JSON {")
		return
	case "wrongschema":
		answer(map[string]any{"status": "STALE", "actions": []any{map[string]any{"description": "no name"}}})
		return
	case "badstatus":
		answer(map[string]any{"status": "MAYBE"})
		return
	case "exit":
		fmt.Fprintln(os.Stderr, "state: cannot reach the backend")
		os.Exit(3)
	case "hang":
		fmt.Fprintln(os.Stderr, "state: hanging")
		time.Sleep(time.Hour)
	case "huge":
		huge(8 << 20)
		return
	case "echo":
		var m map[string]any
		json.Unmarshal(raw, &m)
		answer(map[string]any{"status": "VALID", "state": map[string]any{"request": m}})
		return
	}
	content, _ := req.Config["content"].(string)
	path := filepath.Join("/data", req.Name)
	got, err := os.ReadFile(path)
	absent := req.Gcompose != nil && req.Gcompose["desired"] == "absent"
	switch {
	case absent && err != nil:
		answer(map[string]any{"status": "VALID", "state": map[string]any{}})
	case absent:
		answer(map[string]any{"status": "STALE", "actions": []any{map[string]any{"name": "delete", "args": []string{"action", "delete"}}},
			"gcompose": map[string]any{"change": "delete"}})
	case err == nil && string(got) == content:
		answer(map[string]any{"status": "VALID", "state": map[string]any{"path": path, "content": content}})
	default:
		change := "create"
		if err == nil {
			change = "update"
		}
		res := map[string]any{"status": "STALE", "staleState": map[string]any{"old": string(got)},
			"actions": []any{map[string]any{"name": "write", "description": "write " + path, "args": []string{"action", "write"}}}}
		if req.Gcompose != nil {
			res["gcompose"] = map[string]any{"change": change}
		}
		answer(res)
	}
}

func actionCall(name string) {
	req, _ := readRequest()
	fmt.Fprintf(os.Stderr, "action %s for %s (staleState %s)\n", name, req.Name, req.StaleState)
	path := filepath.Join("/data", req.Name)
	switch name {
	case "write":
		content, _ := req.Config["content"].(string)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			fail("write %s: %v", path, err)
		}
		fmt.Printf("wrote %d bytes to %s\n", len(content), path)
		if req.Gcompose != nil {
			id, _ := json.Marshal(map[string]any{"path": path})
			fmt.Printf("gcompose:identity %s\n", id)
		}
	case "delete":
		if err := os.Remove(path); err != nil {
			fail("delete %s: %v", path, err)
		}
		fmt.Printf("deleted %s\n", path)
	case "fail":
		fail("action failed on purpose")
	default:
		fail("unknown action %q", name)
	}
}
