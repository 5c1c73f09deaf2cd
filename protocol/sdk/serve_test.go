package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	// stdin stays open until every answer is in: at its end the server
	// cancels what is still in flight.
	inR, inW := io.Pipe()
	go func() { io.Copy(inW, &in) }()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int)
	go func() { code := sdk.Run(t.Context(), a, []string{"serve"}, inR, pw, &stderr); pw.Close(); done <- code }()

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
		if len(got) == 9 {
			inW.Close()
		}
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

// TestServeStreamsIdentity: with stream set, an identity report is an
// interim line written while the action still runs, and the response's
// stdout no longer carries it; without stream, nothing changes.
func TestServeStreamsIdentity(t *testing.T) {
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	reported := make(chan struct{})
	proceed := make(chan struct{})
	a := example()
	a.Actions["slow-create"] = func(ctx context.Context, req *sdk.Request) error {
		if err := req.ReportIdentity(map[string]any{"id": "i-9"}); err != nil {
			return err
		}
		close(reported)
		<-proceed // the interim line must be out before the action ends
		req.Printf("done")
		return nil
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "action.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.Request
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	inR, inW := io.Pipe()
	done := make(chan int)
	go func() {
		code := sdk.Run(t.Context(), a, []string{"serve"}, inR, pw, io.Discard)
		pw.Close()
		done <- code
	}()
	sc := bufio.NewScanner(pr)
	next := func() protocol.ServeResponse {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("no more lines: %v", sc.Err())
		}
		if err := v.ValidateMessage(protocol.MsgServeResponse, sc.Bytes()); err != nil {
			t.Fatalf("line %s: %v", sc.Text(), err)
		}
		var resp protocol.ServeResponse
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	send := func(sr protocol.ServeRequest) {
		line, _ := json.Marshal(sr)
		if _, err := inW.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}

	send(protocol.ServeRequest{ID: 1, Call: "action", Action: "slow-create", Stream: true, Request: r})
	if got := next(); got.ID != 1 || !got.Interim() || js(got.Identity) != `{"id":"i-9"}` {
		t.Fatalf("first line %+v, want the interim identity", got)
	}
	<-reported
	close(proceed)
	if got := next(); got.ID != 1 || got.Interim() || got.Error != "" || got.Stdout != "done\n" {
		t.Fatalf("response %+v", got)
	}
	// Without stream the identity is an identity line of stdout, as before.
	send(protocol.ServeRequest{ID: 2, Call: "action", Action: "create", Request: r})
	if got := next(); got.ID != 2 || got.Interim() || !strings.Contains(got.Stdout, protocol.IdentityPrefix+`{"id":"i-2"}`) {
		t.Fatalf("unstreamed response %+v", got)
	}
	inW.Close()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d", code)
	}
}

func js(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestServeCancelsAtEndOfInput: when stdin ends (gcompose went away), a
// create in flight is cancelled at once and rolls back; a delete goes on
// to its end, within DeleteGrace; one that outlasts it is cancelled too.
func TestServeCancelsAtEndOfInput(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "action.json"))
	if err != nil {
		t.Fatal(err)
	}
	var base protocol.Request
	if err := json.Unmarshal(raw, &base); err != nil {
		t.Fatal(err)
	}
	withOp := func(kind string) protocol.Request {
		r := base
		ext := *r.Gcompose
		ext.Operation = &protocol.Operation{ID: "op-" + kind, Kind: kind, StartedAt: time.Now()}
		r.Gcompose = &ext
		return r
	}
	started := make(chan string, 3)
	release := make(chan struct{})
	a := example()
	a.DeleteGrace = time.Second
	a.Actions["create"] = func(ctx context.Context, req *sdk.Request) error {
		started <- "create"
		<-ctx.Done()
		cctx, cancel := sdk.CleanupContext(ctx)
		defer cancel()
		if cctx.Err() != nil {
			return errors.New("the cleanup context is cancelled too")
		}
		return fmt.Errorf("rolled back: %w", ctx.Err())
	}
	a.Actions["delete"] = func(ctx context.Context, req *sdk.Request) error {
		started <- req.Operation().ID
		select {
		case <-release:
			req.Printf("deleted")
			return nil
		case <-ctx.Done():
			return fmt.Errorf("delete cut short: %w", ctx.Err())
		}
	}
	inR, inW := io.Pipe()
	pr, pw := io.Pipe()
	done := make(chan int)
	go func() {
		code := sdk.Run(t.Context(), a, []string{"serve"}, inR, pw, io.Discard)
		pw.Close()
		done <- code
	}()
	for _, sr := range []protocol.ServeRequest{
		{ID: 1, Call: "action", Action: "create", Request: withOp(protocol.ChangeCreate)},
		{ID: 2, Call: "action", Action: "delete", Request: withOp(protocol.ChangeDelete)},
	} {
		line, _ := json.Marshal(sr)
		inW.Write(append(line, '\n'))
	}
	<-started
	<-started
	inW.Close() // gcompose is gone
	sc := bufio.NewScanner(pr)
	read := func() protocol.ServeResponse {
		t.Helper()
		if !sc.Scan() {
			t.Fatal("no response")
		}
		var r protocol.ServeResponse
		json.Unmarshal(sc.Bytes(), &r)
		return r
	}
	if r := read(); r.ID != 1 || !strings.Contains(r.Error, "rolled back: context canceled") {
		t.Fatalf("create at end of input: %+v", r)
	}
	close(release) // the delete was left running: it finishes
	if r := read(); r.ID != 2 || r.Error != "" || r.Stdout != "deleted\n" {
		t.Fatalf("delete at end of input: %+v", r)
	}
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d", code)
	}

	// A delete that outlasts DeleteGrace is cancelled, and serve ends.
	a.Actions["delete"] = func(ctx context.Context, req *sdk.Request) error {
		<-ctx.Done()
		return fmt.Errorf("delete cut short: %w", ctx.Err())
	}
	line, _ := json.Marshal(protocol.ServeRequest{ID: 3, Call: "action", Action: "delete", Request: withOp(protocol.ChangeDelete)})
	var out bytes.Buffer
	start := time.Now()
	if code := sdk.Run(t.Context(), a, []string{"serve"}, bytes.NewReader(append(line, '\n')), &out, io.Discard); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if !strings.Contains(out.String(), "delete cut short: context canceled") || time.Since(start) < a.DeleteGrace {
		t.Fatalf("after %s: %s", time.Since(start), out.String())
	}
}
