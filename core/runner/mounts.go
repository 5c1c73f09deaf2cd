package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/docker/docker/client"
)

// ErrRemoteEngine is the cause of a call refused because it mounts host
// paths (plugs) into a container of an engine that does not see this
// machine's files.
var ErrRemoteEngine = errors.New("the engine does not see this machine's files")

// remoteError says that the engine does not see this machine's files.
type remoteError struct{ host string }

func (e *remoteError) Error() string {
	return fmt.Sprintf("the engine at %s does not see this machine's files (it runs elsewhere; gcompose does not copy plugs to a remote engine: run gcompose on the engine's machine, docs/engines.md)", e.host)
}

func (e *remoteError) Is(target error) bool { return target == ErrRemoteEngine }

// probePath is where a probe container mounts the probe directory.
const probePath = "/gcompose-engine-probe"

// probe is the verdict on one host directory, computed once per Runner.
type probe struct {
	mu   sync.Mutex
	done bool
	err  error // nil: the engine sees the directory as this machine does
}

// localEngine says whether the engine is reached through a local socket,
// and so runs on this machine and resolves bind mounts in its filesystem.
func localEngine(daemonHost string) bool {
	u, err := client.ParseHostURL(daemonHost)
	return err == nil && (u.Scheme == "unix" || u.Scheme == "npipe")
}

// checkMounts makes sure the engine will mount what s names, as it is on
// this machine: a bind mount's source is a path of the engine's machine,
// so an engine elsewhere (DOCKER_HOST=tcp://... or ssh://...) would mount
// whatever has that path there, or an empty directory it creates (Podman).
// A remote engine is asked once per directory whether it sees this
// machine's files (a probe container, never started); if it does not, the
// call is refused. Sources are then checked here, since Podman creates a
// missing one where Docker refuses it.
func (r *Runner) checkMounts(ctx context.Context, s Spec) error {
	for _, m := range s.Mounts {
		if !r.local {
			if err := r.sharesFiles(ctx, s, filepath.Dir(m.HostPath)); err != nil {
				return fmt.Errorf("cannot mount %s: %w", m.HostPath, err)
			}
		}
		if _, err := os.Stat(m.HostPath); err != nil {
			return fmt.Errorf("mount source %s: %w", m.HostPath, err)
		}
	}
	return nil
}

// sharesFiles asks the engine whether it sees dir as this machine does: it
// creates a container (not started) that mounts a fresh directory made in
// dir holding a marker file, and asks the engine for the marker.
func (r *Runner) sharesFiles(ctx context.Context, s Spec, dir string) error {
	v, _ := r.probes.LoadOrStore(dir, &probe{})
	p := v.(*probe)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return p.err
	}
	err := r.probeDir(ctx, s, dir)
	// Only a verdict is remembered; after any other failure (canceled, no
	// such image) the next call asks again.
	if err == nil || errors.Is(err, ErrRemoteEngine) {
		p.done, p.err = true, err
	}
	return err
}

func (r *Runner) probeDir(ctx context.Context, s Spec, dir string) error {
	tmp, err := os.MkdirTemp(dir, ".gcompose-engine-probe-")
	if err != nil {
		// Nothing to probe with (a directory gcompose may not write);
		// the engine is trusted, as it was before probes.
		r.log.Debug("engine probe skipped", "dir", dir, "err", err)
		return nil
	}
	defer os.RemoveAll(tmp)
	if err := os.WriteFile(filepath.Join(tmp, "marker"), nil, 0o644); err != nil {
		return nil
	}
	ps := Spec{Image: s.Image, App: s.App, Resource: s.Resource, Call: "engine-probe",
		Mounts: []Mount{{HostPath: tmp, ContainerPath: probePath, ReadOnly: true}}}
	cfg, hc := r.containerConfig(ps)
	created, err := r.create(ctx, cfg, hc)
	if err != nil {
		// Docker refuses a bind whose source it does not find.
		if strings.Contains(err.Error(), "bind source path does not exist") {
			r.log.Debug("engine probe: create refused", "dir", tmp, "err", err)
			return &remoteError{host: r.cli.DaemonHost()}
		}
		return err // not a verdict: canceled, no such image, ...
	}
	defer func() {
		if err := r.removeDetached(ctx, created.ID); err != nil {
			r.log.Warn("an engine probe container could not be removed; remove it yourself (docker rm -f "+shortID(created.ID)+")", "container", shortID(created.ID), "err", err)
		}
	}()
	err = r.call(ctx, "ContainerStatPath", shortID(created.ID), func(ctx context.Context) error {
		_, err := r.cli.ContainerStatPath(ctx, created.ID, probePath+"/marker")
		return err
	})
	if err != nil {
		if !client.IsErrNotFound(err) {
			return fmt.Errorf("probe whether the engine at %s sees this machine's files: %w", r.cli.DaemonHost(), err)
		}
		// Podman creates a missing bind source: an empty directory there.
		r.log.Debug("engine probe: marker not seen", "dir", tmp)
		return &remoteError{host: r.cli.DaemonHost()}
	}
	return nil
}
