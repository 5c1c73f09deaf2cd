package devnet

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gcompose/gcompose/internal/enginecall"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

const (
	// labelInstance marks every container and network a devnet creates: gcompose.devnet=<instance>.
	labelInstance = "gcompose.devnet"
	// LabelImageHash is the label through which a local image answers for a task package
	// hash:sha3:<hex>:<url>: golem.image.hash=<sha3-224 hex>.
	LabelImageHash = "golem.image.hash"
)

var hashInTaskPackage = regexp.MustCompile(`sha3:([0-9a-fA-F]{56})`)

// imageHash extracts the sha3-224 hex of a task package ("hash:sha3:<hex>:<url>", also "hash://sha3:<hex>:...").
func imageHash(taskPackage string) (string, error) {
	m := hashInTaskPackage.FindStringSubmatch(taskPackage)
	if m == nil {
		return "", fmt.Errorf("task package %q does not carry a sha3-224 image hash (hash:sha3:<56 hex>:<url>)", taskPackage)
	}
	return strings.ToLower(m[1]), nil
}

// resolveImage maps an image hash to a local image: the config's images map first, then the newest local
// image labelled golem.image.hash=<hash>. The deploys of one hash that ask while a lookup runs share its
// answer (lookups): dockerd filters every local image by label for each, which took 0.3-0.6 s a deploy
// when 30 deployed at once on 2 cores. One that asks after it ended looks again, and so sees an image
// labelled since.
func (s *Server) resolveImage(ctx context.Context, hash string) (string, error) {
	if ref, ok := s.cfg.Images[hash]; ok {
		return ref, nil
	}
	s.lookupMu.Lock()
	if l := s.lookups[hash]; l != nil {
		s.lookupMu.Unlock()
		defer step(ctx, "ImageList (shared)", time.Now())
		select {
		case <-l.done:
			return l.id, l.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	l := &lookup{done: make(chan struct{})}
	s.lookups[hash] = l
	s.lookupMu.Unlock()
	// Not cancelled with this deploy's activity: the others wait for it.
	l.id, l.err = s.lookupImage(context.WithoutCancel(ctx), hash)
	s.lookupMu.Lock()
	delete(s.lookups, hash)
	s.lookupMu.Unlock()
	close(l.done)
	return l.id, l.err
}

// lookup is an image lookup by hash in progress, and then its answer.
type lookup struct {
	done chan struct{}
	id   string
	err  error
}

// lookupImage is the newest local image labelled golem.image.hash=<hash>.
func (s *Server) lookupImage(ctx context.Context, hash string) (string, error) {
	imgs, err := s.docker.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelImageHash+"="+hash))})
	if err != nil {
		return "", fmt.Errorf("listing images labelled %s=%s: %w", LabelImageHash, hash, err)
	}
	if len(imgs) == 0 {
		return "", fmt.Errorf("no local image for hash %s: label one with %s=%s or map it under images: in the devnet config", hash, LabelImageHash, hash)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Created > imgs[j].Created })
	return imgs[0].ID, nil
}

// labels returns the labels of everything this instance creates, plus extra ones.
func (s *Server) labels(extra map[string]string) map[string]string {
	l := map[string]string{labelInstance: s.cfg.Instance}
	if s.owner != "" {
		l[labelOwner] = s.owner
	}
	for k, v := range s.cfg.Labels {
		l[k] = v
	}
	for k, v := range extra {
		l[k] = v
	}
	return l
}

func (s *Server) instanceFilter() filters.Args {
	return filters.NewArgs(filters.Arg("label", labelInstance+"="+s.cfg.Instance))
}

// cleanupDocker removes every container and network labelled with this instance. A removal already in
// progress (started by the provider loop) is waited for.
func (s *Server) cleanupDocker(ctx context.Context) error {
	var errs []error
	for attempt := 0; ; attempt++ {
		cs, err := s.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: s.instanceFilter()})
		if err != nil {
			return fmt.Errorf("listing containers: %w", err)
		}
		if len(cs) == 0 {
			break
		}
		errs = errs[:0]
		for _, c := range cs {
			if c.HostConfig.NetworkMode != "" && c.HostConfig.NetworkMode != "none" {
				s.docker.markVPN(c.ID) // its removal leaves a VPN network: one at a time (engine)
			}
			err := s.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			if errors.Is(err, enginecall.ErrHung) {
				return fmt.Errorf("removing container %s: %w", c.ID[:12], err)
			}
			if err != nil && !errdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID[:12], err))
			}
		}
		if len(errs) == 0 || attempt == 40 {
			break
		}
		select {
		case <-ctx.Done():
			return errors.Join(append(errs, ctx.Err())...)
		case <-time.After(250 * time.Millisecond):
		}
	}
	ns, err := s.docker.NetworkList(ctx, network.ListOptions{Filters: s.instanceFilter()})
	if err != nil {
		return fmt.Errorf("listing networks: %w", err)
	}
	// This devnet makes no network; an older one of this instance made two per VPN (legacynet.go): a
	// VPN's macvlan network goes before the bridge it hangs off, and the containers still on them (an old
	// devnet's own container) leave first (removeNetworks).
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].Driver == "macvlan" && ns[j].Driver != "macvlan" })
	ids := make([]string, 0, len(ns))
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	if err := s.removeStuckNetworks(ctx, ids); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeStuckNetworks removes networks a devnet left (removeNetworks), first disconnecting, by force, every
// endpoint the engine lists on them, and again once more when one is still refused. Docker 20.10 keeps the
// endpoint of a container that is gone (a killed test, a dockerd restart mid-removal) and then refuses to
// remove its network ("has active endpoints"); NetworkInspect lists such an endpoint under "ep-<id>", not
// a container, and only a forced disconnect by the endpoint's name deletes it (daemon/container_operations.go
// DisconnectFromNetwork → ForceEndpointDelete, moby 20.10). A network still refused after that is left
// with a warning: a new instance does not need it (its VPNs make no Docker network, legacynet.go), and
// failing New for it would stop every later devnet of that instance name. Only an engine that does not
// answer is an error.
func (s *Server) removeStuckNetworks(ctx context.Context, ids []string) error {
	var err error
	for attempt := 0; attempt < 2 && len(ids) > 0; attempt++ {
		if derr := s.disconnectEndpoints(ctx, ids); derr != nil {
			return derr
		}
		if err = s.removeNetworks(ctx, ids); err == nil || errors.Is(err, enginecall.ErrHung) {
			return err
		}
		var left []string
		for _, id := range ids {
			_, ierr := s.docker.NetworkInspect(ctx, id, network.InspectOptions{})
			if errors.Is(ierr, enginecall.ErrHung) {
				return ierr
			}
			if !errdefs.IsNotFound(ierr) {
				left = append(left, id)
			}
		}
		ids = left
	}
	if len(ids) > 0 {
		s.log.Warn("Docker networks of an earlier devnet of this instance could not be removed (Docker 20.10 keeps endpoints of containers that are gone); going on without them: remove them once dockerd lets go (docker network rm), restarting dockerd frees them",
			"networks", ids, "err", err)
	}
	return nil
}

// disconnectEndpoints force-disconnects every endpoint the engine lists on the networks: by the key it is
// listed under (a container's ID) and by its name (what deletes the endpoint of a container that is gone).
// Only an engine that does not answer is an error; the rest is what removeNetworks reports.
func (s *Server) disconnectEndpoints(ctx context.Context, ids []string) error {
	for _, id := range ids {
		info, err := s.docker.NetworkInspect(ctx, id, network.InspectOptions{})
		if errors.Is(err, enginecall.ErrHung) {
			return err
		}
		if err != nil {
			continue
		}
		for key, ep := range info.Containers {
			whos := []string{key}
			if ep.Name != "" && ep.Name != key {
				whos = append(whos, ep.Name)
			}
			for _, who := range whos {
				err := s.docker.NetworkDisconnect(ctx, id, who, true)
				if errors.Is(err, enginecall.ErrHung) {
					return err
				}
				if err != nil {
					s.log.Debug("disconnecting an endpoint of a leftover network", "network", info.Name, "endpoint", who, "err", err)
				}
			}
		}
	}
	return nil
}

// removeContainers force-removes activity containers; it outlives the caller's context (a removal
// half done would leave a container in "removal in progress"). A container it could not remove is
// logged by name; the error is the first engine hang, which the caller's request reports.
func (s *Server) removeContainers(ctx context.Context, ids []string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.docker.bound+time.Minute)
	defer cancel()
	var hung error
	for _, id := range ids {
		if hung != nil {
			s.log.Warn("activity container not removed: the engine does not answer; remove it by hand", "container", id)
			continue
		}
		err := s.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		if err != nil && !errdefs.IsNotFound(err) {
			s.log.Warn("removing activity container; remove it by hand", "container", id, "err", err)
		}
		if errors.Is(err, enginecall.ErrHung) {
			hung = fmt.Errorf("removing container %s: %w", short(id), err)
		}
	}
	return hung
}

// containerAlive reports whether a container runs; when it does not, why.
func (s *Server) containerAlive(ctx context.Context, id string) (bool, string) {
	c, err := s.docker.ContainerInspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return false, "container removed"
	}
	if err != nil {
		return true, "" // unknown: do not declare it dead
	}
	if c.State != nil && c.State.Status == "created" {
		return true, "" // deployed, not started yet
	}
	if c.State == nil || !c.State.Running {
		code := 0
		if c.State != nil {
			code = c.State.ExitCode
		}
		return false, fmt.Sprintf("container exited with code %d", code)
	}
	return true, ""
}

// execIn runs argv in a container through the Engine API and captures its output. It returns when the
// process exits, even if a background child (`cmd &`) still holds the output streams open.
func (s *Server) execIn(ctx context.Context, containerID string, argv []string) (stdout, stderr string, code int, err error) {
	return s.execAs(ctx, containerID, "", argv)
}

// execAs is execIn as user ("": the container's).
func (s *Server) execAs(ctx context.Context, containerID, user string, argv []string) (stdout, stderr string, code int, err error) {
	ex, err := s.docker.ContainerExecCreate(ctx, containerID, container.ExecOptions{User: user, Cmd: argv, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return "", "", -1, fmt.Errorf("creating exec in %s: %w", containerID[:12], err)
	}
	att, err := s.docker.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", "", -1, fmt.Errorf("starting exec in %s: %w", containerID[:12], err)
	}
	defer att.Close()
	defer step(ctx, "exec", time.Now())
	var so, se syncwriter.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stdcopy.StdCopy(&so, &se, att.Reader)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-ctx.Done():
			return so.String(), se.String(), -1, ctx.Err()
		case <-tick.C:
			in, err := s.docker.ContainerExecInspect(ctx, ex.ID)
			if err == nil && !in.Running && (in.Pid != 0 || in.ExitCode != 0) {
				// The process has exited; give the streams a moment to drain, then stop reading (a
				// backgrounded child may keep them open for ever).
				select {
				case <-done:
				case <-time.After(300 * time.Millisecond):
					att.Close()
					<-done
				}
				break wait
			}
		}
	}
	for i := 0; ; i++ {
		in, err := s.docker.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return so.String(), se.String(), -1, fmt.Errorf("inspecting exec in %s: %w", containerID[:12], err)
		}
		if !in.Running || i > 50 {
			return so.String(), se.String(), in.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return so.String(), se.String(), -1, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
