// Package enginetest serves hung Docker Engines on unix sockets, for tests of what a client does when
// the engine takes its connections and never answers (dockerd 20.10 deadlocked in libnetwork). They are
// real sockets and a real HTTP server: the client under test goes through its whole transport.
package enginetest

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// APIVersion is the API version the fake engines announce on /_ping (Docker 20.10's).
const APIVersion = "1.41"

// Engine is a fake engine on a unix socket.
type Engine struct {
	// Host is its DOCKER_HOST (unix:///...).
	Host  string
	close func()
	once  sync.Once
}

// Close stops it: its listener and every connection it holds.
func (e *Engine) Close() { e.once.Do(e.close) }

func socket(t testing.TB) (net.Listener, string) {
	t.Helper()
	// A short path: a unix socket's path is limited to ~100 bytes, and t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "hung-engine-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	return ln, path
}

// Silent is an engine that accepts every connection, reads what is sent and never writes a byte.
func Silent(t testing.TB) *Engine {
	t.Helper()
	ln, path := socket(t)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	e := &Engine{Host: "unix://" + path, close: func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}}
	t.Cleanup(e.Close)
	return e
}

// Partial is an engine that answers /_ping and /version as Docker 20.10 does (so a client's version
// negotiation passes) and every other request with answer when answer returns true; the others it reads
// and never answers, as a deadlocked dockerd does for every call that needs the lock it waits for.
// answer sees the request's path without its /v1.xx prefix.
func Partial(t testing.TB, answer func(w http.ResponseWriter, r *http.Request, path string) bool) *Engine {
	t.Helper()
	ln, path := socket(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/v1.") {
			if i := strings.Index(p[1:], "/"); i > 0 {
				p = p[i+1:]
			}
		}
		switch p {
		case "/_ping":
			w.Header().Set("API-Version", APIVersion)
			w.Header().Set("OSType", "linux")
			_, _ = io.WriteString(w, "OK")
			return
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"Version":"20.10.24","ApiVersion":"`+APIVersion+`","MinAPIVersion":"1.12","Os":"linux"}`)
			return
		}
		if answer != nil && answer(w, r, p) {
			return
		}
		// Hung. Reading the body first lets the server notice the client going away.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("fake engine: %v", err)
		}
	}()
	e := &Engine{Host: "unix://" + path, close: func() {
		srv.Close()
		<-done
	}}
	t.Cleanup(e.Close)
	return e
}

// clientFrames are the frames of a goroutine of the client side: one left with any of them after the
// client got its error and was closed is blocked on the hung engine (or leaked).
var clientFrames = []string{
	"net/http.(*persistConn)",
	"net/http.(*Transport)",
	"github.com/docker/docker/client.",
	"gcompose/internal/enginecall.",
}

// NoClientGoroutines fails t if, within a few seconds, goroutines of the client side (frames, plus the
// clientFrames) are still there. Call it before closing the fake engine: closing it would unblock a
// client stuck on it and hide the leak.
func NoClientGoroutines(t testing.TB, frames ...string) {
	t.Helper()
	frames = append(frames, clientFrames...)
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := clientGoroutines(frames)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutine(s) of the client still there after it returned:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func clientGoroutines(frames []string) []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var left []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "enginetest.NoClientGoroutines") || strings.Contains(g, "enginetest.clientGoroutines") {
			continue
		}
		for _, f := range frames {
			if strings.Contains(g, f) {
				left = append(left, g)
				break
			}
		}
	}
	return left
}

// Settled fails t unless the number of goroutines comes back to at most before within a few seconds
// (a runtime.NumGoroutine check, for after everything, fake engine included, is closed).
func Settled(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the test:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
