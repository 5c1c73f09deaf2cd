// Package longlived runs the containers that must outlive `gcompose deploy`
// (the payments keeper, the local proxies) as resources of the graph. A
// long-lived container runs the adapter's own image with other arguments, on
// the host network, labelled gcompose.app, gcompose.resource and
// gcompose.longlived=true (never gcompose.managed: that label marks the
// short adapter calls that gcompose removes after a crash).
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
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// Labels of a long-lived container.
const (
	LabelApp       = "gcompose.app"
	LabelResource  = "gcompose.resource"
	LabelLongLived = "gcompose.longlived"
	// LabelConfig fingerprints what the container was started for, so a
	// state call tells a container of an older config.
	LabelConfig = "gcompose.config"
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

// Name is the container name of an app's resource.
func Name(app, resource string) string {
	return strings.Trim(unsafeName.ReplaceAllString("gcompose-"+app+"-"+resource, "-"), "-.")
}

// Container is a long-lived container found by its labels.
type Container struct {
	ID      string
	Running bool
	State   string
	Config  string // LabelConfig
	Labels  map[string]string
}

// Find returns the app's long-lived container for resource, nil if none.
func Find(ctx context.Context, d *client.Client, app, resource string) (*Container, error) {
	f := filters.NewArgs(filters.Arg("label", LabelApp+"="+app), filters.Arg("label", LabelResource+"="+resource), filters.Arg("label", LabelLongLived+"=true"))
	list, err := d.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("listing containers of %s/%s: %w", app, resource, err)
	}
	if len(list) == 0 {
		return nil, nil
	}
	c := list[0]
	return &Container{ID: c.ID, Running: c.State == "running", State: c.State, Config: c.Labels[LabelConfig], Labels: c.Labels}, nil
}

// Remove removes the app's long-lived containers for resource (stopping
// them first, so they can clean up).
func Remove(ctx context.Context, d *client.Client, app, resource string) error {
	for {
		c, err := Find(ctx, d, app, resource)
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
	labels := map[string]string{LabelApp: s.App, LabelResource: s.Resource, LabelLongLived: "true", LabelConfig: Fingerprint(s.Config)}
	for k, v := range s.Labels {
		labels[k] = v
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
	}
	name := Name(s.App, s.Resource)
	created, err := d.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return "", fmt.Errorf("creating container %s from %s: %w", name, s.Image, err)
	}
	id := created.ID
	fail := func(err error) (string, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = d.ContainerRemove(rctx, id, container.RemoveOptions{Force: true})
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
	deadline := time.Now().Add(wait)
	for {
		out, errOut, lerr := logs(ctx, d, id)
		if lerr == nil && strings.Contains(out, ReadyLine) {
			return id, nil
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

// Logs returns the container's stdout (where a long-lived process reports
// facts such as its local port) and stderr.
func Logs(ctx context.Context, d *client.Client, id string) (string, string, error) {
	return logs(ctx, d, id)
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
