// Command testadapter is a small adapter image for the tests of the runner
// and the protocol client. With arguments it is a probe for the runner
// ("echo", "stderr N", "sleep D", "huge N", "exit C", "stdin-count",
// "probe", "await-release"); without arguments it answers a Deployster init, and "state" /
// "action NAME" are its state and action calls. Its behaviour is chosen by
// the request: the resource name at init ("plain*": a Deployster-only
// adapter, "badproto*": protocol 99, "badinit*": an init answer of the wrong
// shape), config.mode on state calls ("garbage", "wrongschema", "exit",
// "hang", "huge", "echo", ...). "serve" runs it as a long-lived server of
// JSON-line requests (offered in the init answer for resources named
// "*serve*").
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	case "await-release":
		// One line, then nothing until the test creates /data/release: the
		// test sees the line only if stdout is read while the adapter runs.
		fmt.Println("first")
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat("/data/release"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "never released")
				os.Exit(3)
			}
		}
		fmt.Println("second")
	case "state":
		stateCall()
	case "action":
		actionCall(arg(args, 1))
	case "serve":
		serve()
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
	// Where it may write besides its mounts (engines differ: Podman adds
	// tmpfs on /run and /var/tmp to a read-only root).
	var writable []string
	for _, dir := range []string{"/", "/tmp", "/run", "/var/tmp", "/dev/shm"} {
		if f, err := os.CreateTemp(dir, "probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			writable = append(writable, dir)
		}
	}
	out["writable"] = writable
	// "Max open files  1024  4096  files": soft and hard.
	limits, _ := os.ReadFile("/proc/self/limits")
	for _, line := range strings.Split(string(limits), "\n") {
		for key, name := range map[string]string{"nofile": "Max open files", "nproc": "Max processes"} {
			if rest, ok := strings.CutPrefix(line, name); ok {
				if f := strings.Fields(rest); len(f) >= 2 {
					out[key] = f[0] + " " + f[1]
				}
			}
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

// outcome is what one call produced, written by the one-shot main or the
// server.
type outcome struct {
	result any    // the JSON answer (init, state)
	raw    string // printed instead of an answer (garbage, huge)
	stdout string // an action's free text
	err    error  // failure: stderr and exit 1 (one-shot), error (served)
	exit   int    // exit at once with this code, in both modes
	hang   bool
}

func readRequest() ([]byte, request) {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read stdin: %v\n", err)
		os.Exit(1)
	}
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		fmt.Fprintf(os.Stderr, "stdin is not a request: %v: %q\n", err, raw)
		os.Exit(1)
	}
	return raw, req
}

func oneShot(o outcome) {
	if o.hang {
		time.Sleep(time.Hour)
	}
	if o.exit != 0 {
		os.Exit(o.exit)
	}
	if o.raw != "" {
		fmt.Print(o.raw)
	} else if o.result != nil {
		json.NewEncoder(os.Stdout).Encode(o.result)
	}
	fmt.Print(o.stdout)
	if o.err != nil {
		fmt.Fprintln(os.Stderr, o.err)
		os.Exit(1)
	}
}

func initCall() {
	_, req := readRequest()
	oneShot(initAnswer(req))
}

func stateCall() {
	raw, req := readRequest()
	oneShot(stateAnswer(raw, req))
}

func actionCall(name string) {
	raw, req := readRequest()
	oneShot(actionAnswer(name, raw, req))
}

// serve answers JSON-line requests ({id, call, action, args, request}) with
// JSON-line responses ({id, result|error, stdout}), each in its own
// goroutine, until stdin closes.
func serve() {
	fmt.Fprintln(os.Stderr, "serving")
	var mu sync.Mutex
	var wg sync.WaitGroup
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var sr struct {
			ID      uint64          `json:"id"`
			Call    string          `json:"call"`
			Action  string          `json:"action"`
			Request json.RawMessage `json:"request"`
		}
		if err := json.Unmarshal(sc.Bytes(), &sr); err != nil {
			fmt.Fprintf(os.Stderr, "bad request line: %v\n", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var req request
			json.Unmarshal(sr.Request, &req)
			var o outcome
			switch sr.Call {
			case "init":
				o = initAnswer(req)
			case "state":
				o = stateAnswer(sr.Request, req)
			case "action":
				o = actionAnswer(sr.Action, sr.Request, req)
			}
			if o.hang {
				time.Sleep(time.Hour)
			}
			mu.Lock()
			defer mu.Unlock()
			if o.exit != 0 {
				os.Exit(o.exit)
			}
			if o.raw != "" {
				fmt.Print(o.raw)
				return
			}
			resp := map[string]any{"id": sr.ID}
			if o.err != nil {
				resp["error"] = o.err.Error()
			} else if o.result != nil {
				resp["result"] = o.result
			}
			if o.stdout != "" {
				resp["stdout"] = o.stdout
			}
			line, _ := json.Marshal(resp)
			os.Stdout.Write(append(line, '\n'))
		}()
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, "stdin closed, server exits")
}

// barrier counts the calls of mode "barrier" seen by this process.
var barrier struct {
	sync.Mutex
	n int
}

func initAnswer(req request) outcome {
	fmt.Fprintf(os.Stderr, "init for %s\n", req.Name)
	ext := map[string]any{"protocol": 1}
	res := map[string]any{
		"plugs": map[string]any{
			"data":   map[string]any{"container_path": "/data", "optional": true},
			"ro":     map[string]any{"container_path": "/ro", "optional": true, "writable": false},
			"needed": map[string]any{"container_path": "/needed", "optional": !strings.Contains(req.Name, "needplug")},
			// The engine's socket, as the Golem payments and proxy adapters declare it.
			"golem-docker-socket": map[string]any{"container_path": "/var/run/docker.sock", "optional": true},
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
		"gcompose":     ext,
	}
	if strings.Contains(req.Name, "serve") {
		ext["serve"] = true
	}
	switch {
	case strings.Contains(req.Name, "plain"):
		delete(res, "gcompose")
	case strings.Contains(req.Name, "badproto"):
		ext["protocol"] = 99
	case strings.Contains(req.Name, "badinit"):
		delete(res, "state_action")
	case strings.Contains(req.Name, "bridged"):
		ext["network"] = "bridge"
	case strings.Contains(req.Name, "withenv"):
		ext["env"] = []string{"TESTADAPTER_KEY", "TESTADAPTER_UNSET"}
	case strings.Contains(req.Name, "garbageinit"):
		return outcome{raw: "hello, I am not JSON\n"}
	}
	return outcome{result: res}
}

func stateAnswer(raw []byte, req request) outcome {
	fmt.Fprintf(os.Stderr, "state for %s\n", req.Name)
	mode, _ := req.Config["mode"].(string)
	switch mode {
	case "garbage":
		return outcome{raw: "this is not JSON {\n"}
	case "wrongschema":
		return outcome{result: map[string]any{"status": "STALE", "actions": []any{map[string]any{"description": "no name"}}}}
	case "badstatus":
		return outcome{result: map[string]any{"status": "MAYBE"}}
	case "exit":
		fmt.Fprintln(os.Stderr, "state: cannot reach the backend")
		return outcome{exit: 3}
	case "fail":
		return outcome{err: fmt.Errorf("state: backend said no")}
	case "hang":
		fmt.Fprintln(os.Stderr, "state: hanging")
		return outcome{hang: true}
	case "huge":
		return outcome{raw: strings.Repeat(strings.Repeat("x", 1023)+"\n", 8<<10)}
	case "sleep":
		time.Sleep(200 * time.Millisecond)
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"slept": true}}}
	case "barrier":
		// Answers only once config.count calls are in flight together in
		// this process (serve mode), proving they are concurrent.
		n, _ := req.Config["count"].(float64)
		barrier.Lock()
		barrier.n++
		barrier.Unlock()
		deadline := time.Now().Add(20 * time.Second)
		for {
			barrier.Lock()
			seen := barrier.n
			barrier.Unlock()
			if seen >= int(n) {
				return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"seen": seen}}}
			}
			if time.Now().After(deadline) {
				return outcome{err: fmt.Errorf("only %d of %d calls arrived together", seen, int(n))}
			}
			time.Sleep(5 * time.Millisecond)
		}
	case "engine":
		// Which engine the mounted socket reaches: its GET /info's ID.
		c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", "/var/run/docker.sock")
		}}}
		resp, err := c.Get("http://engine/info")
		if err != nil {
			return outcome{err: fmt.Errorf("state: the engine's socket: %w", err)}
		}
		defer resp.Body.Close()
		var info struct{ ID, ServerVersion string }
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			return outcome{err: fmt.Errorf("state: the engine's /info: %w", err)}
		}
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"engine_id": info.ID, "engine_version": info.ServerVersion}}}
	case "ifaces":
		ifaces, _ := net.Interfaces()
		var names []string
		for _, i := range ifaces {
			names = append(names, i.Name)
		}
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"interfaces": names}}}
	case "echo":
		var m map[string]any
		json.Unmarshal(raw, &m)
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"request": m}}}
	}
	content, _ := req.Config["content"].(string)
	path := filepath.Join("/data", req.Name)
	got, err := os.ReadFile(path)
	absent := req.Gcompose != nil && req.Gcompose["desired"] == "absent"
	switch {
	case absent && err != nil:
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{}}}
	case absent:
		return outcome{result: map[string]any{"status": "STALE", "actions": []any{map[string]any{"name": "delete", "args": []string{"action", "delete"}}},
			"gcompose": map[string]any{"change": "delete"}}}
	case err == nil && string(got) == content:
		return outcome{result: map[string]any{"status": "VALID", "state": map[string]any{"path": path, "content": content}}}
	}
	change := "create"
	if err == nil {
		change = "update"
	}
	res := map[string]any{"status": "STALE", "staleState": map[string]any{"old": string(got)},
		"actions": []any{map[string]any{"name": "write", "description": "write " + path, "args": []string{"action", "write"}}}}
	if req.Gcompose != nil {
		res["gcompose"] = map[string]any{"change": change}
	}
	return outcome{result: res}
}

func actionAnswer(name string, raw []byte, req request) outcome {
	fmt.Fprintf(os.Stderr, "action %s for %s (staleState %s)\n", name, req.Name, req.StaleState)
	path := filepath.Join("/data", req.Name)
	switch name {
	case "write":
		content, _ := req.Config["content"].(string)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return outcome{err: fmt.Errorf("write %s: %v", path, err)}
		}
		out := fmt.Sprintf("wrote %d bytes to %s\n", len(content), path)
		if req.Gcompose != nil {
			id, _ := json.Marshal(map[string]any{"path": path})
			out += fmt.Sprintf("gcompose:identity %s\n", id)
		}
		return outcome{stdout: out}
	case "delete":
		if err := os.Remove(path); err != nil {
			return outcome{err: fmt.Errorf("delete %s: %v", path, err)}
		}
		return outcome{stdout: fmt.Sprintf("deleted %s\n", path)}
	case "fail":
		return outcome{err: fmt.Errorf("action failed on purpose")}
	case "echo":
		return outcome{stdout: string(raw) + "\n"}
	}
	return outcome{err: fmt.Errorf("unknown action %q", name)}
}
