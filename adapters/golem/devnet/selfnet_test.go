package devnet_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/gcompose/gcompose/internal/testimage"
)

// TestInContainerKeepsItsPort runs the devnet as `make demo` and the doc test do: in a container on a
// network of its own, its API published on a host port. Creating a VPN leaves that container as it is:
// when a VPN was a Docker network the container joined, the VPN network could take the container's
// default gateway, Docker moved the published port to it by restarting its port proxy, and the request
// that created the VPN got EOF. The container's network is named as compose names it, after the instance.
func TestInContainerKeepsItsPort(t *testing.T) {
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx := ctxT(t, 5*time.Minute)
	url, instance, id := startInContainer(t, ctx, docker, "")

	// One client, as an adapter has: the VPN is created on a connection already open.
	hc := &http.Client{Timeout: 30 * time.Second}
	call := func(method, path string, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequestWithContext(ctx, method, url+path, rd)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		code, _, err := call("GET", "/me", nil)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the devnet does not answer on %s: %d %v", url, code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var ids []string
	for i, rng := range []string{"192.168.77.0", "192.168.78.0"} {
		code, body, err := call("POST", "/net-api/v1/net", map[string]string{"ip": rng, "mask": "255.255.255.0"})
		if err != nil || code != http.StatusOK {
			t.Fatalf("creating VPN %d (%s/24): %d %s %v", i+1, rng, code, body, err)
		}
		var n struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(body, &n); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, n.ID)
		if code, _, err := call("GET", "/me", nil); err != nil || code != http.StatusOK {
			t.Fatalf("after creating VPN %d: GET /me: %d %v", i+1, code, err)
		}
	}
	// The devnet's container is on its own network only: a VPN is no Docker network (vpnrelay.go).
	insp, err := docker.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := insp.NetworkSettings.Networks[instance]; !ok || len(insp.NetworkSettings.Networks) != 1 {
		t.Errorf("the devnet's container is on %d networks, want its own (%s) only", len(insp.NetworkSettings.Networks), instance)
	}
	for _, id := range ids {
		if code, body, err := call("DELETE", "/net-api/v1/net/"+id, nil); err != nil || code != http.StatusOK {
			t.Fatalf("removing VPN %s: %d %s %v", id, code, body, err)
		}
	}
	if code, _, err := call("GET", "/me", nil); err != nil || code != http.StatusOK {
		t.Fatalf("after removing the VPNs: GET /me: %d %v", code, err)
	}
}
