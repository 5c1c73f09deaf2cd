package runner_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/enginecall"
	"github.com/gcompose/gcompose/internal/enginecall/enginetest"
)

// hungID is the container the fake engines create.
const hungID = "0123456789ab0123456789ab0123456789ab0123456789ab0123456789ab0123"

// answers makes a fake engine answer the steps named (create, inspect, attach, start) as Docker
// does; every other call hangs.
func answers(steps ...string) func(w http.ResponseWriter, r *http.Request, path string) bool {
	on := map[string]bool{}
	for _, s := range steps {
		on[s] = true
	}
	return func(w http.ResponseWriter, r *http.Request, path string) bool {
		step := ""
		switch {
		case path == "/containers/create":
			step = "create"
		case strings.HasSuffix(path, "/json") && strings.HasPrefix(path, "/containers/"):
			step = "inspect"
		case strings.HasSuffix(path, "/attach"):
			step = "attach"
		case strings.HasSuffix(path, "/start"):
			step = "start"
		}
		if !on[step] {
			return false
		}
		_, _ = io.Copy(io.Discard, r.Body)
		switch step {
		case "create":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"Id":"`+hungID+`","Warnings":[]}`)
		case "inspect":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"Id":"`+hungID+`","State":{"Status":"created"}}`)
		case "attach":
			// The upgrade, then the end of the (empty) output: the adapter said nothing.
			c, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return false
			}
			_, _ = buf.WriteString("HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
			_ = buf.Flush()
			c.Close()
		case "start":
			w.WriteHeader(http.StatusNoContent)
		}
		return true
	}
}

// TestHungEngine: an engine that takes the connection and never answers makes every call fail within
// the runner's EngineTimeout with an error naming the call and the engine, the clean-up after it does
// not hang either and names the container it could not remove, and no goroutine stays blocked.
func TestHungEngine(t *testing.T) {
	const bound = 300 * time.Millisecond
	run := func(answered ...string) func(ctx context.Context, r *runner.Runner) error {
		return func(ctx context.Context, r *runner.Runner) error {
			_, err := r.Run(ctx, runner.Spec{Image: "gcompose/never:run", App: "shop", Resource: "services.db", Call: "apply"})
			return err
		}
	}
	cases := []struct {
		name string
		// silent: the engine never answers at all, not even /_ping.
		silent   bool
		answered []string
		do       func(ctx context.Context, r *runner.Runner) error
		call     string // the call the error must name
		leftover bool   // the error must name the container left behind
	}{
		{name: "silent socket", silent: true, call: "Ping"},
		{name: "create", do: run(), call: "ContainerCreate"},
		{name: "attach", answered: []string{"create", "inspect"}, do: run(), call: "ContainerAttach", leftover: true},
		{name: "start", answered: []string{"create", "inspect", "attach"}, do: run(), call: "ContainerStart", leftover: true},
		{name: "wait", answered: []string{"create", "inspect", "attach", "start"}, do: run(), call: "ContainerWait", leftover: true},
		{name: "image", do: func(ctx context.Context, r *runner.Runner) error {
			_, err := r.ImageID(ctx, "gcompose/never:run")
			return err
		}, call: "ImageInspect"},
		{name: "list", do: func(ctx context.Context, r *runner.Runner) error {
			_, err := r.Leftovers(ctx, "shop")
			return err
		}, call: "ContainerList"},
		{name: "session start", answered: []string{"create", "inspect", "attach"}, do: func(ctx context.Context, r *runner.Runner) error {
			s, err := r.Start(ctx, runner.Spec{Image: "gcompose/never:run", App: "shop", Resource: "services.db", Call: "serve"})
			if err == nil {
				_ = s.Kill(ctx)
			}
			return err
		}, call: "ContainerStart", leftover: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			var e *enginetest.Engine
			if tc.silent {
				e = enginetest.Silent(t)
			} else {
				e = enginetest.Partial(t, answers(tc.answered...))
			}
			t.Setenv("DOCKER_HOST", e.Host)
			// Without the bound, a call would wait for this context (the adapter call's own
			// timeout): the error would then come late and name no call.
			ctx, cancel := context.WithTimeout(context.Background(), 20*bound)
			defer cancel()
			start := time.Now()
			r, err := runner.New(ctx, runner.Options{EngineTimeout: bound, Timeout: 20 * bound})
			if err == nil {
				err = tc.do(ctx, r)
				r.Close()
			}
			took := time.Since(start)
			if err == nil {
				t.Fatalf("no error from an engine that never answers %s", tc.call)
			}
			msg := err.Error()
			t.Logf("after %s: %s", took.Round(time.Millisecond), msg)
			if !errors.Is(err, enginecall.ErrHung) {
				t.Errorf("the error is not an engine hang: %v", err)
			}
			for _, want := range []string{"did not answer " + tc.call, e.Host, "within " + bound.String(), "restarting dockerd"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the error does not say %q: %s", want, msg)
				}
			}
			if tc.leftover && !strings.Contains(msg, "docker rm -f "+hungID[:12]) {
				t.Errorf("the error does not name the container left behind (%s): %s", hungID[:12], msg)
			}
			// The call, then the removal after it: a few bounds, far from the context's end.
			if took > 8*bound {
				t.Errorf("the error took %s; the bound is %s", took, bound)
			}
			enginetest.NoClientGoroutines(t, "gcompose/core/runner.(*")
			e.Close()
			enginetest.Settled(t, before)
		})
	}
}
