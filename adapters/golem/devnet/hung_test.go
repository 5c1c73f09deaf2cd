package devnet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/enginecall"
	"github.com/gcompose/gcompose/internal/enginecall/enginetest"
)

// emptyEngine answers the calls of a devnet's start and stop (its leftovers: no container, no network)
// and hangs on every other, as a dockerd deadlocked in libnetwork hangs on network changes.
func emptyEngine(w http.ResponseWriter, r *http.Request, path string) bool {
	if r.Method != http.MethodGet || (path != "/containers/json" && path != "/networks") {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, "[]")
	return true
}

// TestHungEngine: a devnet whose engine stops answering fails the requests that need it, within its
// EngineTimeout, with a 500 that names the call and the engine, instead of holding them for ever; a
// devnet that cannot even list its leftovers does not start. No goroutine stays blocked on the engine.
func TestHungEngine(t *testing.T) {
	const bound = 300 * time.Millisecond
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	newDocker := func(t *testing.T, host string) *client.Client {
		docker, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatal(err)
		}
		return docker
	}
	checkMsg := func(t *testing.T, msg, call, host string) {
		t.Helper()
		for _, want := range []string{"did not answer " + call, host, "within " + bound.String(), "restarting dockerd"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error does not say %q: %s", want, msg)
			}
		}
	}

	t.Run("start", func(t *testing.T) {
		before := runtime.NumGoroutine()
		e := enginetest.Silent(t)
		docker := newDocker(t, e.Host)
		ctx, cancel := context.WithTimeout(context.Background(), 20*bound)
		defer cancel()
		start := time.Now()
		_, err := devnet.New(ctx, devnet.Options{AppKey: testKey, Docker: docker, Logger: log, EngineTimeout: bound})
		took := time.Since(start)
		if err == nil {
			t.Fatal("a devnet started on an engine that never answers")
		}
		t.Logf("after %s: %v", took.Round(time.Millisecond), err)
		if !errors.Is(err, enginecall.ErrHung) {
			t.Errorf("not an engine hang: %v", err)
		}
		checkMsg(t, err.Error(), "ContainerList", e.Host)
		if took > 4*bound {
			t.Errorf("the error took %s; the bound is %s", took, bound)
		}
		docker.Close()
		enginetest.NoClientGoroutines(t, "adapters/golem/devnet.(*")
		e.Close()
		enginetest.Settled(t, before)
	})

	t.Run("requests", func(t *testing.T) {
		before := runtime.NumGoroutine()
		e := enginetest.Partial(t, emptyEngine)
		docker := newDocker(t, e.Host)
		ctx, cancel := context.WithTimeout(context.Background(), 20*bound)
		defer cancel()
		srv, err := devnet.New(ctx, devnet.Options{Config: devnet.Config{Instance: "hung"}, AppKey: testKey, Docker: docker, Logger: log, EngineTimeout: bound})
		if err != nil {
			t.Fatalf("devnet.New: %v", err)
		}
		hs := httptest.NewServer(srv.Handler())
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * bound}
		// A VPN needs no engine (its packets go through the devnet's relay): created at once.
		body, _ := json.Marshal(map[string]string{"ip": "192.168.8.0", "mask": "255.255.255.0"})
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/net-api/v1/net", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := hc.Do(req); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("creating a VPN on a hung engine: %v %v, want 200", resp, err)
		} else {
			resp.Body.Close()
		}
		// Two requests that need the engine at once: each fails within the bound.
		type answer struct {
			status int
			msg    string
			took   time.Duration
		}
		answers := make(chan answer, 2)
		for range 2 {
			go func() {
				start := time.Now()
				req, _ := http.NewRequest(http.MethodGet, hs.URL+devnet.AdminPrefix+"/info", nil)
				req.Header.Set("Authorization", "Bearer "+testKey)
				resp, err := hc.Do(req)
				if err != nil {
					answers <- answer{status: -1, msg: err.Error(), took: time.Since(start)}
					return
				}
				defer resp.Body.Close()
				var m struct {
					Message string `json:"message"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&m)
				answers <- answer{status: resp.StatusCode, msg: m.Message, took: time.Since(start)}
			}()
		}
		for range 2 {
			a := <-answers
			t.Logf("after %s: %d %s", a.took.Round(time.Millisecond), a.status, a.msg)
			if a.status != http.StatusInternalServerError {
				t.Errorf("status %d, want 500: %s", a.status, a.msg)
			}
			checkMsg(t, a.msg, "Info", e.Host)
			if a.took > 4*bound {
				t.Errorf("the answer took %s; the bound is %s", a.took, bound)
			}
		}
		hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		docker.Close()
		enginetest.NoClientGoroutines(t, "adapters/golem/devnet.(*")
		e.Close()
		enginetest.Settled(t, before)
	})
}
