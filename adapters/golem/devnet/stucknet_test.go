package devnet_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/internal/enginecall/enginetest"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestLeftoverNetworkWithActiveEndpoints: a network an earlier devnet of the instance left, which Docker
// 20.10 refuses to remove ("has active endpoints": the endpoint of a container that is gone, after a
// killed test), does not stop a new devnet of that instance. The engine is the real one behind a proxy
// that answers for that network as such a Docker does: when the stale endpoint is listed (under its
// "ep-" key, as NetworkInspect shows one of a container that is gone), a forced disconnect by the
// endpoint's name frees it and the network is removed; when the refusal stays (no endpoint listed),
// the devnet warns and starts anyway.
func TestLeftoverNetworkWithActiveEndpoints(t *testing.T) {
	testimage.RequireDocker(t)
	real, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer real.Close()
	for _, tc := range []struct {
		name  string
		stale bool // the stale endpoint is listed, and a forced disconnect by its name frees the network
	}{
		{"stale endpoint listed", true},
		{"refused with no endpoint listed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, time.Minute)
			b := make([]byte, 4)
			rand.Read(b)
			instance := "stucknet-" + hex.EncodeToString(b)
			nw, err := real.NetworkCreate(ctx, "gcompose-devnet-"+instance+"-0123456789ab", network.CreateOptions{Internal: true,
				Labels: map[string]string{"gcompose.devnet": instance, "gcompose.test": t.Name()}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = real.NetworkRemove(context.Background(), nw.ID) })
			const ghost = "gcompose-devnet-gone-provider"
			const ghostEP = "ep-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			var freed, refused atomic.Int32
			proxy := enginetest.Proxy(t, "", func(w http.ResponseWriter, r *http.Request, path string, forward http.Handler) bool {
				switch {
				case r.Method == http.MethodGet && path == "/networks/"+nw.ID && tc.stale && freed.Load() == 0:
					rec := httptest.NewRecorder()
					forward.ServeHTTP(rec, r)
					var body map[string]any
					if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
						t.Errorf("inspect of %s: %v", nw.ID, err)
						return false
					}
					body["Containers"] = map[string]any{ghostEP: map[string]any{"Name": ghost, "EndpointID": ghostEP[3:]}}
					w.Header().Set("Content-Type", "application/json")
					_ = json.NewEncoder(w).Encode(body)
					return true
				case r.Method == http.MethodPost && path == "/networks/"+nw.ID+"/disconnect":
					var req struct {
						Container string
						Force     bool
					}
					_ = json.NewDecoder(r.Body).Decode(&req)
					w.Header().Set("Content-Type", "application/json")
					if req.Container != ghost || !req.Force || !tc.stale {
						w.WriteHeader(http.StatusNotFound)
						_, _ = io.WriteString(w, `{"message":"No such container: `+req.Container+`"}`)
						return true
					}
					freed.Add(1)
					return true
				case r.Method == http.MethodDelete && path == "/networks/"+nw.ID && freed.Load() == 0:
					refused.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusForbidden)
					_, _ = io.WriteString(w, `{"message":"error while removing network: network gcompose-devnet-`+instance+` id `+nw.ID+` has active endpoints"}`)
					return true
				}
				return false
			})
			docker, err := client.NewClientWithOpts(client.WithHost(proxy.Host), client.WithAPIVersionNegotiation())
			if err != nil {
				t.Fatal(err)
			}
			defer docker.Close()
			var logs syncwriter.Buffer
			srv, err := devnet.New(ctx, devnet.Options{Config: devnet.Config{Instance: instance}, AppKey: testKey, Docker: docker,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatalf("devnet.New beside a network Docker will not remove: %v\n%s", err, logs.String())
			}
			_ = srv.Close(ctx)
			_, ierr := real.NetworkInspect(ctx, nw.ID, network.InspectOptions{})
			if tc.stale {
				if freed.Load() == 0 || !errdefs.IsNotFound(ierr) {
					t.Fatalf("the stale endpoint was disconnected by name %d time(s); the network: %v\n%s", freed.Load(), ierr, logs.String())
				}
				return
			}
			if refused.Load() == 0 || ierr != nil || !strings.Contains(logs.String(), "could not be removed") {
				t.Fatalf("refused %d time(s), network %v; want a warning and the devnet started:\n%s", refused.Load(), ierr, logs.String())
			}
		})
	}
}
