// Package longlived runs the containers that must outlive `gcompose deploy`
// (the payments keeper, the local proxies) as resources of the graph. A
// long-lived container runs the adapter's own image with other arguments, on
// the host network, labelled gcompose.app, gcompose.resource,
// gcompose.longlived=true and the yagna node it works for (never
// gcompose.managed: that label marks the short adapter calls that gcompose
// removes after a crash).
//
// Secrets (the yagna app key) reach it on an attached stdin at start, as one
// JSON object, then stdin is closed: they are never in the container's
// environment, arguments, labels or logs, so `docker inspect` does not show
// them; the process keeps them in memory only. A container that stops cannot
// be restarted without them, so it has no restart policy: the resource's
// state call sees it stopped and gcompose recreates it.
package longlived

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/protocol"
)

// Labels of a long-lived container.
const (
	LabelApp       = "gcompose.app"
	LabelResource  = "gcompose.resource"
	LabelLongLived = "gcompose.longlived"
	// LabelConfig fingerprints what the container was started for, so a
	// state call tells a container of an older config.
	LabelConfig = "gcompose.config"
	// LabelLineage and LabelOperation tag the container with the state's
	// lineage and the operation that started it (CONTRACT-10), so a sweep
	// tells this state's containers from another's of the same app.
	LabelLineage   = "gcompose.lineage"
	LabelOperation = "gcompose.operation"
	// LabelAdapter is the adapter image that started the container (Docker
	// shows an image id instead of the name once the tag moves); a first
	// deploy leaves the container to that adapter's sweep
	// (runner.LabelAdapter).
	LabelAdapter = runner.LabelAdapter
	// LabelNode is the yagna node the container works for: the requestor
	// identity of GET /me. A sweep sees only its own node's containers: the
	// same app name deployed through another yagna on this machine (another
	// devnet, a testnet and a mainnet node) is not this app.
	LabelNode = "gcompose.yagna-node"
)

// ReadyLine is what a long-lived process prints on stdout once it works;
// Start waits for it.
const ReadyLine = "gcompose:ready"

// Spec is one long-lived container.
type Spec struct {
	App, Resource string
	Image         string
	Args          []string
	// Secrets are written to the container's stdin as one JSON object.
	Secrets map[string]string
	// Config is fingerprinted into the LabelConfig label.
	Config any
	// Labels are extra labels.
	Labels map[string]string
	// Lineage and Operation become LabelLineage and LabelOperation.
	Lineage, Operation string
	// Node is the yagna node it works for (Node), LabelNode.
	Node string
	// ContainerName overrides the name (Name of App, Lineage, Resource): a
	// container of no app's state (the market watcher) names itself.
	ContainerName string
	// AutoRemove: the Engine removes the container once it exits (one that
	// stops by itself, as the market watcher when idle, leaves nothing).
	AutoRemove bool
}

// Node is the identity of the yagna node yc talks to (GET /me): what
// LabelNode holds.
func Node(ctx context.Context, yc *yagna.Client) (string, error) {
	me, err := yc.Me(ctx)
	if err != nil {
		return "", fmt.Errorf("asking yagna at %s who it is (GET /me): %w", yc.BaseURL, err)
	}
	if me.Identity == "" {
		return "", fmt.Errorf("yagna at %s answered GET /me without an identity", yc.BaseURL)
	}
	return me.Identity, nil
}

// Fingerprint is the LabelConfig value of a config.
func Fingerprint(cfg any) string {
	b, _ := json.Marshal(cfg)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Docker connects to the Engine through the socket the adapter's plug
// mounts at /var/run/docker.sock (or DOCKER_HOST).
func Docker() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker engine client: %w", err)
	}
	return c, nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// Name is the container name of a resource of an app's state:
// gcompose-<app>-<lineage, 8 characters>-<resource>, so that two states of
// one app name (two checkouts, two CI jobs) do not take each other's names.
func Name(app, lineage, resource string) string {
	if len(lineage) > 8 {
		lineage = lineage[:8]
	}
	name := "gcompose-" + app + "-"
	if lineage != "" {
		name += lineage + "-"
	}
	return strings.Trim(unsafeName.ReplaceAllString(name+resource, "-"), "-.")
}

// Container is a long-lived container found by its labels.
type Container struct {
	ID      string
	Running bool
	State   string
	Config  string // LabelConfig
	Labels  map[string]string
}

// Find returns the long-lived container of the app's state (lineage) for
// resource, nil if none. A container of another lineage of the same app
// belongs to another state and is never returned; one without a lineage
// label (started by an older gcompose) is.
func Find(ctx context.Context, d *client.Client, app, lineage, resource string) (*Container, error) {
	f := filters.NewArgs(filters.Arg("label", LabelApp+"="+app), filters.Arg("label", LabelResource+"="+resource), filters.Arg("label", LabelLongLived+"=true"))
	list, err := d.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing containers of %s/%s: %w", app, resource, err)
	}
	for _, c := range list {
		if lin, ok := c.Labels[LabelLineage]; ok && lin != lineage {
			continue
		}
		return &Container{ID: c.ID, Running: c.State == "running", State: c.State, Config: c.Labels[LabelConfig], Labels: c.Labels}, nil
	}
	return nil, nil
}

// Sweep finds the app's long-lived containers of image (the adapter's own:
// each runs its adapter's image) for the yagna node (Node) that no state
// names: those whose resource is not among known (every resource of the
// adapter type in the state). A container of this lineage is removed when
// terminate says so for its id (protocol SweepRequest.Terminates: a sweep
// asked to terminate, and the id in its only list when it has one), one of
// another lineage (or none) is only reported
// (CONTRACT-10). One labelled with another node works for another yagna:
// no state of this one can own it, nor a deploy through this one collide
// with it, so it is not listed; one without the label (an older gcompose)
// is. kind names the object ("keeper", "proxy") in the answer.
func Sweep(ctx context.Context, d *client.Client, app, lineage, image, kind, node string, known map[string]bool, terminate func(id string) bool) ([]protocol.Orphan, error) {
	f := filters.NewArgs(filters.Arg("label", LabelApp+"="+app), filters.Arg("label", LabelLongLived+"=true"))
	list, err := d.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing the containers of %s: %w", app, err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	out := []protocol.Orphan{}
	for _, c := range list {
		res := c.Labels[LabelResource]
		adapter := c.Labels[LabelAdapter]
		if adapter == "" {
			adapter = c.Image
		}
		if known[res] || adapter != image {
			continue
		}
		if n, ok := c.Labels[LabelNode]; ok && n != node {
			continue
		}
		o := protocol.Orphan{Kind: kind + " container", ID: c.ID[:12], Lineage: c.Labels[LabelLineage], Resource: res, Action: protocol.OrphanReported,
			Detail: fmt.Sprintf("%s, %s", strings.TrimPrefix(firstName(c.Names), "/"), c.State)}
		if terminate(o.ID) && lineage != "" && c.Labels[LabelLineage] == lineage {
			timeout := 10
			_ = d.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &timeout})
			if err := d.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
				return nil, fmt.Errorf("removing container %s: %w", c.ID[:12], err)
			}
			o.Action = protocol.OrphanTerminated
		}
		out = append(out, o)
	}
	return out, nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// Remove removes the long-lived containers of the app's state (lineage)
// for resource (stopping them first, so they can clean up).
func Remove(ctx context.Context, d *client.Client, app, lineage, resource string) error {
	for {
		c, err := Find(ctx, d, app, lineage, resource)
		if err != nil || c == nil {
			return err
		}
		timeout := 10
		_ = d.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &timeout})
		if err := d.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
			return fmt.Errorf("removing container %s of %s/%s: %w", c.ID[:12], app, resource, err)
		}
	}
}

// Start creates and starts the container, hands it the secrets on stdin,
// and waits until it prints ReadyLine (or fails, with its log tail).
func Start(ctx context.Context, d *client.Client, s Spec, wait time.Duration) (string, error) {
	id, err := Launch(ctx, d, s)
	if err != nil {
		return "", err
	}
	return id, Ready(ctx, d, id, ContainerName(s), wait)
}

// ContainerName is the name of the container of s.
func ContainerName(s Spec) string {
	if s.ContainerName != "" {
		return s.ContainerName
	}
	return Name(s.App, s.Lineage, s.Resource)
}

// Launch creates and starts the container and hands it the secrets on
// stdin, without waiting until it is ready: for a caller that has other
// work meanwhile and finds it ready later by other means (the market
// watcher answers on its socket).
func Launch(ctx context.Context, d *client.Client, s Spec) (string, error) {
	labels := map[string]string{LabelLongLived: "true", LabelConfig: Fingerprint(s.Config), LabelAdapter: s.Image}
	if s.App != "" {
		labels[LabelApp], labels[LabelResource] = s.App, s.Resource
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	if s.Lineage != "" {
		labels[LabelLineage] = s.Lineage
	}
	if s.Operation != "" {
		labels[LabelOperation] = s.Operation
	}
	if s.Node != "" {
		labels[LabelNode] = s.Node
	}
	cfg := &container.Config{
		Image: s.Image, Cmd: s.Args, Labels: labels,
		AttachStdin: true, OpenStdin: true, StdinOnce: true,
	}
	hc := &container.HostConfig{
		NetworkMode:    "host",
		ReadonlyRootfs: true,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		Tmpfs:          map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=16m"},
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "2"}},
		// The limits of adapter containers: a keeper or proxy that leaks
		// memory or forks without end is stopped, not the host.
		Resources:  runner.DefaultResources(),
		AutoRemove: s.AutoRemove,
	}
	name := ContainerName(s)
	created, err := d.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return "", fmt.Errorf("creating container %s from %s: %w", name, s.Image, err)
	}
	id := created.ID
	fail := func(err error) (string, error) {
		removeFailed(ctx, d, id)
		return "", err
	}
	att, err := d.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return fail(fmt.Errorf("attaching to the stdin of %s: %w", name, err))
	}
	if err := d.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		att.Close()
		return fail(fmt.Errorf("starting %s: %w", name, err))
	}
	secrets, _ := json.Marshal(s.Secrets)
	_, werr := att.Conn.Write(append(secrets, '\n'))
	if werr == nil {
		werr = att.CloseWrite()
	}
	att.Close()
	if werr != nil {
		return fail(fmt.Errorf("handing secrets to %s on stdin: %w", name, werr))
	}
	return id, nil
}

// removeFailed removes a container that did not start as it should.
func removeFailed(ctx context.Context, d *client.Client, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = d.ContainerRemove(rctx, id, container.RemoveOptions{Force: true})
}

// Ready waits until the launched container id (named name) prints
// ReadyLine; one that exits or is not ready within wait is removed, and
// the error carries its log tail.
func Ready(ctx context.Context, d *client.Client, id, name string, wait time.Duration) error {
	fail := func(err error) error {
		removeFailed(ctx, d, id)
		return err
	}
	deadline := time.Now().Add(wait)
	for {
		out, errOut, lerr := logs(ctx, d, id)
		if lerr == nil && strings.Contains(out, ReadyLine) {
			return nil
		}
		ins, err := d.ContainerInspect(ctx, id)
		if err != nil {
			return fail(fmt.Errorf("inspecting %s: %w", name, err))
		}
		if ins.State != nil && !ins.State.Running {
			return fail(fmt.Errorf("%s exited with status %d: %s", name, ins.State.ExitCode, tail(errOut+out)))
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%s not ready within %s: %s", name, wait, tail(errOut+out)))
		}
		select {
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func logs(ctx context.Context, d *client.Client, id string) (string, string, error) {
	rc, err := d.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "200"})
	if err != nil {
		return "", "", err
	}
	defer rc.Close()
	var out, errOut bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &errOut, rc); err != nil && !errors.Is(err, io.EOF) {
		return out.String(), errOut.String(), err
	}
	return out.String(), errOut.String(), nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	if s == "" {
		return "(no output)"
	}
	return strings.Join(lines, " | ")
}

// ReadSecrets is the container side: it reads the JSON object Start wrote
// on stdin (until the newline or EOF).
func ReadSecrets(r io.Reader) (map[string]string, error) {
	var m map[string]string
	if err := json.NewDecoder(io.LimitReader(r, 64<<10)).Decode(&m); err != nil {
		return nil, fmt.Errorf("reading secrets from stdin: %w", err)
	}
	return m, nil
}
