package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func TestServe(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	// "wait" blocks until "release" ran: both must be in flight at once.
	release := make(chan struct{})
	a := example()
	a.Actions["wait"] = func(ctx context.Context, req *sdk.Request) error {
		select {
		case <-release:
			req.Printf("released")
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			t.Error("wait was never released: requests do not run concurrently")
			return nil
		}
	}
	a.Actions["release"] = func(ctx context.Context, req *sdk.Request) error { close(release); return nil }

	req := func(name string) protocol.Request {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		var r protocol.Request
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	lines := []protocol.ServeRequest{
		{ID: 1, Call: "action", Action: "wait", Request: req("action.json")},
		{ID: 2, Call: "init", Request: req("init.json")},
		{ID: 3, Call: "state", Request: req("state-present.json")},
		{ID: 4, Call: "action", Action: "create", Args: []string{"action", "create"}, Request: req("action.json")},
		{ID: 5, Call: "action", Action: "delete", Request: req("action.json")},
		{ID: 6, Call: "action", Action: "panic", Request: req("action.json")},
		{ID: 7, Call: "destroy", Request: req("action.json")},
		{ID: 8, Call: "action", Action: "release", Request: req("action.json")},
	}
	var in bytes.Buffer
	for _, l := range lines {
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.ValidateMessage(protocol.MsgServeRequest, raw); err != nil && l.ID != 7 {
			t.Fatalf("request %d: %v", l.ID, err)
		}
		in.Write(append(raw, '\n'))
	}
	in.WriteString("\n{\"id\":9,\"call\":[]}\nnot json at all\n")

	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int)
	go func() { code := sdk.Run(t.Context(), a, []string{"serve"}, &in, pw, &stderr); pw.Close(); done <- code }()

	got := map[uint64]protocol.ServeResponse{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if err := v.ValidateMessage(protocol.MsgServeResponse, sc.Bytes()); err != nil {
			t.Errorf("response %s: %v", sc.Text(), err)
		}
		var r protocol.ServeResponse
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[r.ID]; dup {
			t.Errorf("two responses for id %d", r.ID)
		}
		got[r.ID] = r
	}
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, stderr.String())
	}

	want := []struct {
		id          uint64
		result, err string // substrings; "" = must be empty
		stdout      string
	}{
		{1, "{}", "", "released\n"},
		{2, `"serve":true`, "", ""},
		{3, `"status":"STALE"`, "", ""},
		{4, "{}", "", "using key of 6 bytes\ncreated (was old)\n" + protocol.IdentityPrefix + `{"id":"i-2"}` + "\n"},
		{5, "", "cannot delete", ""},
		{6, "", "panicked: boom", ""},
		{7, "", `unknown call "destroy"`, ""},
		{8, "{}", "", ""},
		{9, "", "bad request line", ""},
	}
	for _, w := range want {
		r, ok := got[w.id]
		if !ok {
			t.Errorf("no response for id %d", w.id)
			continue
		}
		if (w.result == "") != (len(r.Result) == 0) || !strings.Contains(string(r.Result), w.result) {
			t.Errorf("id %d: result %s, want %q", w.id, r.Result, w.result)
		}
		if (w.err == "") != (r.Error == "") || !strings.Contains(r.Error, w.err) {
			t.Errorf("id %d: error %q, want %q", w.id, r.Error, w.err)
		}
		if r.Stdout != w.stdout {
			t.Errorf("id %d: stdout %q, want %q", w.id, r.Stdout, w.stdout)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d responses, want %d", len(got), len(want))
	}
	if !strings.Contains(stderr.String(), "bad request line, ignored") {
		t.Errorf("the unparseable line was not logged: %s", stderr.String())
	}
}
