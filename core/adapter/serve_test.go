package adapter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/protocol"
)

func closeClient(t *testing.T, c *adapter.Client) {
	t.Helper()
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("close: %v", err)
	}
}

func TestServeRoundTrip(t *testing.T) {
	e := setup(t, nil)
	defer closeClient(t, e.client)
	dir := t.TempDir()
	plugs := map[string]adapter.Plug{"data": {Path: dir}}

	// Ten resources of one image, same plugs: one server for all of them.
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := e.target(fmt.Sprintf("files.serve%d", i), map[string]any{"content": fmt.Sprint("v", i)}, plugs)
			st, err := e.client.State(e.ctx, tg, protocol.Present, nil)
			if err != nil {
				errs <- err
				return
			}
			if st.Status != protocol.Stale || st.Gcompose.Change != protocol.ChangeCreate {
				errs <- fmt.Errorf("%s: first state %+v", tg.Name, st)
				return
			}
			out, err := e.client.Action(e.ctx, tg, st.Actions[0], st.StaleState, nil)
			if err != nil {
				errs <- err
				return
			}
			if out.Identity["path"] != "/data/"+tg.Name || !strings.HasPrefix(out.Output, "wrote 2 bytes") {
				errs <- fmt.Errorf("%s: action %+v", tg.Name, out)
				return
			}
			st, err = e.client.State(e.ctx, tg, protocol.Present, nil)
			if err == nil && st.Status != protocol.Valid {
				err = fmt.Errorf("%s: state after action %+v", tg.Name, st)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < 10; i++ {
		if got, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("files.serve%d", i))); string(got) != fmt.Sprint("v", i) {
			t.Errorf("file %d: %q", i, got)
		}
	}
	if got := strings.Join(e.count.calls(), ","); got != "init,serve" {
		t.Errorf("containers run: %s; want one init and one server", got)
	}
	if !strings.Contains(e.stderr.String(), "[serve "+e.image+"] serving\n") {
		t.Errorf("server stderr not forwarded: %q", e.stderr.String())
	}

	// Calls are in flight together: each of these answers only once all ten
	// have reached the server.
	var wg2 sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			tg := e.target(fmt.Sprintf("files.serve%d", i), map[string]any{"mode": "barrier", "count": 10}, plugs)
			if _, err := e.client.State(e.ctx, tg, protocol.Present, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg2.Wait()
	if err := e.client.Close(e.ctx); err != nil {
		t.Fatal(err)
	}
	left, err := e.runner.Leftovers(e.ctx, e.app)
	if err != nil || len(left) != 0 {
		t.Fatalf("after Close: %v %v", left, err)
	}
}

func TestServeErrors(t *testing.T) {
	e := setup(t, func(o *adapter.Options) { o.Timeout = 2 * time.Second })
	defer closeClient(t, e.client)
	state := func(name string, cfg map[string]any) error {
		_, err := e.client.State(e.ctx, e.target(name, cfg, nil), protocol.Present, nil)
		return err
	}
	check := func(err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("no error, want %q", want)
		}
		t.Log(err)
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
	}
	if err := state("files.serve", map[string]any{"mode": "echo"}); err != nil {
		t.Fatal(err)
	}
	// Failures that leave the server up.
	check(state("files.serve", map[string]any{"mode": "fail"}),
		"adapter "+e.image+" call state for files.serve failed (served): state: backend said no")
	check(state("files.serve", map[string]any{"mode": "wrongschema"}),
		`files.serve: state call: answer invalid at /actions/0: missing property "name"`)
	check(state("files.serve", map[string]any{"mode": "hang"}),
		"adapter "+e.image+" call state for files.serve (served) timed out after 2s", "state: hanging")
	check(state("files.serve", map[string]any{"count": -1}), "files.serve: config invalid at /count")
	if got := strings.Join(e.count.calls(), ","); got != "init,serve" {
		t.Fatalf("containers: %s", got)
	}

	// A server that breaks the protocol dies; the next call restarts it once.
	check(state("files.serve", map[string]any{"mode": "garbage"}),
		"call state for files.serve (served) failed: adapter server ended: response line \"this is not JSON {\": answer is not JSON")
	if err := state("files.serve", map[string]any{"mode": "echo"}); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	// A server that exits takes its calls in flight with it, and is not
	// restarted twice.
	check(state("files.serve", map[string]any{"mode": "exit"}),
		"adapter server ended: its container exited", "state: cannot reach the backend")
	check(state("files.serve", map[string]any{"mode": "echo"}), "server died again and is not restarted")
	if got := strings.Join(e.count.calls(), ","); got != "init,serve,serve" {
		t.Fatalf("containers: %s", got)
	}
}

func TestServeOptOut(t *testing.T) {
	e := setup(t, func(o *adapter.Options) { o.NoServe = true })
	if _, err := e.client.State(e.ctx, e.target("files.serve", map[string]any{"mode": "echo"}, nil), protocol.Present, nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.count.calls(), ","); got != "init,state" {
		t.Fatalf("containers: %s", got)
	}
}
