package runner_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/enginecall/enginetest"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestCancelledCreateLeavesNothing: a call cancelled right after its
// ContainerCreate reached the engine (the engine made the container; its
// answer, with the ID, never reached the runner) leaves no container: the
// runner finds it by its create nonce and removes it before the call
// returns, not at the next run's clean-up.
func TestCancelledCreateLeavesNothing(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	_, img := adapterImage(t, ctx)
	// The real engine, not the proxy; its own client, closed at the end (an
	// idle connection would count as a leaked client goroutine in
	// TestHungEngine).
	docker, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	labels := testimage.Labels(t)
	left := func(ctx context.Context) []container.Summary {
		cs, err := docker.ContainerList(ctx, container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", testimage.Label+"="+labels[testimage.Label]))})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	t.Cleanup(func() {
		for _, c := range left(context.Background()) {
			_ = docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
		}
		docker.Close()
	})
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var made atomic.Int32
	e := enginetest.Proxy(t, "", func(w http.ResponseWriter, r *http.Request, path string, forward http.Handler) bool {
		if path != "/containers/create" {
			return false
		}
		// The engine makes the container; the call is cancelled before
		// its answer is passed on, and the answer is lost.
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		if rec.Code == http.StatusCreated {
			made.Add(1)
		}
		cancel()
		<-r.Context().Done()
		return true
	})
	t.Setenv("DOCKER_HOST", e.Host)
	var r *runner.Runner
	r, err = runner.New(ctx, runner.Options{Labels: labels, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := time.Now()
	_, err = r.Run(callCtx, spec(img, "echo"))
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v; want the call cancelled", err)
	}
	if made.Load() != 1 {
		t.Fatalf("the engine made %d containers; the test needs the create to have reached it", made.Load())
	}
	if cs := left(ctx); len(cs) > 0 {
		t.Fatalf("after the cancelled create returned (%s), its container is left: %s %v", took.Round(time.Millisecond), cs[0].ID[:12], cs[0].Labels)
	}
	t.Logf("cancelled create: nothing left when the call returned after %s", took.Round(time.Millisecond))
}
