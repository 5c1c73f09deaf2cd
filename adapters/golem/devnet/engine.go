package devnet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// engine is the devnet's Docker Engine client. It has the methods of *client.Client the devnet uses, with
// two differences.
//
// Every call is bounded (enginecall): an engine that takes the connection and never answers (dockerd
// 20.10 deadlocked in libnetwork) fails the call within the bound with an error that names it, and the
// devnet's HTTP API answers that request 500 with that message, as yagna answers an internal error,
// instead of holding it for ever.
//
// And the changes to the endpoints of the networks behind VPNs are made one at a time (topo), which is
// what the deadlock needs two of. Docker 20.10's libnetwork takes its locks in opposite orders on two
// paths (vendor/github.com/docker/libnetwork in the 20.10 tree, moby/libnetwork's bump_20.10 branch):
// an endpoint joining or leaving network N (endpoint.go sbJoin and sbLeave, through network.go
// (*network).getSvcRecords) locks N, then the controller; the controller's watchLoop, deleting the
// svc-record watch of an endpoint that left N (store.go (*controller).processEndpointDelete), locks the
// controller, then N (n.ID()). An endpoint leaving N while another joins or leaves N can deadlock the
// two, and every later call that needs the controller (network ls, every container start and removal)
// hangs behind them until dockerd restarts (moby/moby#46661, libnetwork#2649; fixed by moby/moby#42545,
// backported to 20.10 only by libnetwork#2679, in no 20.10 release). Endpoints join at a container's
// start and at NetworkConnect, and leave at NetworkDisconnect and when a container stops or is removed.
// The devnet cannot order processEndpointDelete itself (it runs after the leave's call returned), nor
// another process's calls, but it no longer makes its VPNs' nodes join and leave concurrently: a 30-node
// deploy and its teardown were exactly that.
type engine struct {
	cli   *client.Client
	host  string
	bound time.Duration

	// topo serializes the calls that add or remove endpoints of VPN networks: network create, connect,
	// disconnect and remove, and the start, kill, stop and removal of containers on VPN networks.
	topo sync.Mutex
	// onVPN holds the IDs and names of the containers created on a VPN network (their start and
	// removal change its endpoints).
	mu    sync.Mutex
	onVPN map[string]bool
}

func newEngine(cli *client.Client, bound time.Duration) *engine {
	if bound <= 0 {
		bound = enginecall.DefaultBound
	}
	return &engine{cli: cli, host: cli.DaemonHost(), bound: bound, onVPN: map[string]bool{}}
}

// call and get run one engine call, a step of the ExeScript command ctx runs for, if any (trace.go).
func call(ctx context.Context, e *engine, name, target string, fn func(context.Context) error) error {
	defer step(ctx, name, time.Now())
	return enginecall.Call(ctx, e.host, name, target, e.bound, fn)
}

func get[T any](ctx context.Context, e *engine, name, target string, fn func(context.Context) (T, error)) (T, error) {
	defer step(ctx, name, time.Now())
	return enginecall.Get(ctx, e.host, name, target, e.bound, fn)
}

// topology runs fn under topo. The wait for topo is bounded too: behind a hung call, the others fail
// rather than queue for ever.
func (e *engine) topology(ctx context.Context, name, target string, fn func(context.Context) error) error {
	if !e.lockTopo(ctx, name, target) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &enginecall.HungError{Host: e.host, Call: name + " (queued behind an earlier change of the VPN networks)", Target: target, Bound: e.bound}
	}
	defer e.topo.Unlock()
	return call(ctx, e, name, target, fn)
}

func (e *engine) lockTopo(ctx context.Context, name, target string) bool {
	if e.topo.TryLock() {
		return true
	}
	deadline := time.Now().Add(e.bound)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		if e.topo.TryLock() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

func (e *engine) markVPN(ids ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		if id != "" {
			e.onVPN[id] = true
		}
	}
}

func (e *engine) isVPN(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.onVPN[id]
}

// containerCall runs a call that ends or starts a container: under topo when the container is on a VPN.
func (e *engine) containerCall(ctx context.Context, name, id string, fn func(context.Context) error) error {
	if e.isVPN(id) {
		return e.topology(ctx, name, short(id), fn)
	}
	return call(ctx, e, name, short(id), fn)
}

func short(id string) string { return id[:min(12, len(id))] }

// ContainerCreate is the client's, on the engine's own platform.
func (e *engine) ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, name string) (container.CreateResponse, error) {
	resp, err := get(ctx, e, "ContainerCreate", name, func(ctx context.Context) (container.CreateResponse, error) {
		return e.cli.ContainerCreate(ctx, cfg, hc, nc, nil, name)
	})
	if err == nil && hc != nil && hc.NetworkMode != "" && hc.NetworkMode != "none" {
		e.markVPN(resp.ID, name)
	}
	return resp, err
}

func (e *engine) ContainerStart(ctx context.Context, id string, o container.StartOptions) error {
	return e.containerCall(ctx, "ContainerStart", id, func(ctx context.Context) error { return e.cli.ContainerStart(ctx, id, o) })
}

func (e *engine) ContainerKill(ctx context.Context, id, signal string) error {
	return e.containerCall(ctx, "ContainerKill", id, func(ctx context.Context) error { return e.cli.ContainerKill(ctx, id, signal) })
}

func (e *engine) ContainerStop(ctx context.Context, id string, o container.StopOptions) error {
	return e.containerCall(ctx, "ContainerStop", id, func(ctx context.Context) error { return e.cli.ContainerStop(ctx, id, o) })
}

func (e *engine) ContainerRemove(ctx context.Context, id string, o container.RemoveOptions) error {
	return e.containerCall(ctx, "ContainerRemove", id, func(ctx context.Context) error { return e.cli.ContainerRemove(ctx, id, o) })
}

func (e *engine) ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error) {
	return get(ctx, e, "ContainerInspect", short(id), func(ctx context.Context) (container.InspectResponse, error) {
		return e.cli.ContainerInspect(ctx, id)
	})
}

func (e *engine) ContainerList(ctx context.Context, o container.ListOptions) ([]container.Summary, error) {
	return get(ctx, e, "ContainerList", "", func(ctx context.Context) ([]container.Summary, error) { return e.cli.ContainerList(ctx, o) })
}

func (e *engine) ContainerExecCreate(ctx context.Context, id string, o container.ExecOptions) (container.ExecCreateResponse, error) {
	return get(ctx, e, "ContainerExecCreate", short(id), func(ctx context.Context) (container.ExecCreateResponse, error) {
		return e.cli.ContainerExecCreate(ctx, id, o)
	})
}

func (e *engine) ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error) {
	return get(ctx, e, "ContainerExecInspect", short(execID), func(ctx context.Context) (container.ExecInspect, error) {
		return e.cli.ContainerExecInspect(ctx, execID)
	})
}

// ContainerExecAttach starts an exec and returns its stream, as the client library's, with the
// upgrade handshake bounded (enginecall.Upgrade); the stream after it is the caller's.
func (e *engine) ContainerExecAttach(ctx context.Context, execID string, o container.ExecAttachOptions) (types.HijackedResponse, error) {
	body, err := json.Marshal(container.ExecStartOptions{Detach: o.Detach, Tty: o.Tty, ConsoleSize: o.ConsoleSize})
	if err != nil {
		return types.HijackedResponse{}, err
	}
	defer step(ctx, "ContainerExecAttach", time.Now())
	hr, err := enginecall.Upgrade(ctx, e.cli, e.bound, "ContainerExecAttach", short(execID),
		http.MethodPost, "/exec/"+url.PathEscape(execID)+"/start", "application/json", body)
	if err != nil {
		return hr, fmt.Errorf("starting exec %s: %w", short(execID), err)
	}
	return hr, nil
}

func (e *engine) ImageList(ctx context.Context, o image.ListOptions) ([]image.Summary, error) {
	return get(ctx, e, "ImageList", "", func(ctx context.Context) ([]image.Summary, error) { return e.cli.ImageList(ctx, o) })
}

// Info is the engine's own description; its ID names the engine whose local images are the payloads.
func (e *engine) Info(ctx context.Context) (system.Info, error) {
	return get(ctx, e, "Info", "", func(ctx context.Context) (system.Info, error) { return e.cli.Info(ctx) })
}

func (e *engine) NetworkCreate(ctx context.Context, name string, o network.CreateOptions) (network.CreateResponse, error) {
	var resp network.CreateResponse
	err := e.topology(ctx, "NetworkCreate", name, func(ctx context.Context) error {
		var err error
		resp, err = e.cli.NetworkCreate(ctx, name, o)
		return err
	})
	return resp, err
}

func (e *engine) NetworkConnect(ctx context.Context, netID, id string, s *network.EndpointSettings) error {
	return e.topology(ctx, "NetworkConnect", short(id)+" to network "+short(netID), func(ctx context.Context) error {
		return e.cli.NetworkConnect(ctx, netID, id, s)
	})
}

func (e *engine) NetworkDisconnect(ctx context.Context, netID, id string, force bool) error {
	return e.topology(ctx, "NetworkDisconnect", short(id)+" from network "+short(netID), func(ctx context.Context) error {
		return e.cli.NetworkDisconnect(ctx, netID, id, force)
	})
}

func (e *engine) NetworkRemove(ctx context.Context, netID string) error {
	return e.topology(ctx, "NetworkRemove", short(netID), func(ctx context.Context) error { return e.cli.NetworkRemove(ctx, netID) })
}

func (e *engine) NetworkInspect(ctx context.Context, netID string, o network.InspectOptions) (network.Inspect, error) {
	return get(ctx, e, "NetworkInspect", short(netID), func(ctx context.Context) (network.Inspect, error) {
		return e.cli.NetworkInspect(ctx, netID, o)
	})
}

func (e *engine) NetworkList(ctx context.Context, o network.ListOptions) ([]network.Summary, error) {
	return get(ctx, e, "NetworkList", "", func(ctx context.Context) ([]network.Summary, error) { return e.cli.NetworkList(ctx, o) })
}
