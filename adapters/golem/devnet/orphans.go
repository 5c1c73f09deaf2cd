package devnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// labelOwner names, on every container and network a devnet creates, the devnet that created it: the
// container it runs in ("container:<id or name>"), or its process ("process:<pid namespace>:<pid>:<start
// time in clock ticks>"). A devnet killed (SIGKILL) in the middle of a deploy leaves what dockerd
// made for it after its own cleanup could run; the next start of the same
// instance removes it, but an instance that never starts again (a test's, a second devnet's) would leave
// it for good. Every devnet's start and Close removes what a devnet that is gone left (sweepOrphans).
const labelOwner = labelInstance + ".owner"

// ownerOf says who this devnet is, for labelOwner: its container, or its process, or "" when neither
// can be told (no /proc), and then nothing it creates is ever taken for an orphan.
func ownerOf(self string) string {
	if self != "" {
		return "container:" + self
	}
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	pid := os.Getpid()
	start, err := processStart(pid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("process:%s:%d:%s", ns, pid, start)
}

// processStart reads a process's start time (clock ticks after boot: field 22 of /proc/<pid>/stat), which
// tells it from a later process given the same pid.
func processStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command (field 2) is in parentheses and may hold spaces: the fields after the last ")" from 3 on.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields after the command", pid, len(f))
	}
	return f[19], nil
}

// ownerGone says whether the devnet named by an owner label is gone for sure: its container is not
// running (or no longer exists), or its process, in this devnet's pid namespace, has ended. An owner it
// cannot judge (another pid namespace, an engine error) is taken as alive.
func (s *Server) ownerGone(ctx context.Context, owner string) (bool, error) {
	if id, ok := strings.CutPrefix(owner, "container:"); ok {
		c, err := s.docker.ContainerInspect(ctx, id)
		switch {
		case errdefs.IsNotFound(err):
			return true, nil
		case errors.Is(err, enginecall.ErrHung):
			return false, err
		case err != nil || c.State == nil:
			return false, nil
		}
		return !c.State.Running, nil
	}
	rest, ok := strings.CutPrefix(owner, "process:")
	if !ok {
		return false, nil
	}
	i := strings.LastIndexByte(rest, ':')
	j := strings.LastIndexByte(rest[:max(i, 0)], ':')
	if i < 0 || j < 0 {
		return false, nil
	}
	ns, pidText, start := rest[:j], rest[j+1:i], rest[i+1:]
	mine, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || mine != ns {
		return false, nil
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil {
		return false, nil
	}
	now, err := processStart(pid)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, nil
	}
	return now != start, nil
}

// sweepOrphans removes the containers and networks of other instances whose devnet is gone (labelOwner);
// this instance's own leftovers are cleanupDocker's.
func (s *Server) sweepOrphans(ctx context.Context) error {
	f := filters.NewArgs(filters.Arg("label", labelOwner))
	gone := map[string]bool{}
	orphan := func(labels map[string]string) (bool, error) {
		owner := labels[labelOwner]
		if labels[labelInstance] == s.cfg.Instance || owner == "" {
			return false, nil
		}
		g, seen := gone[owner]
		if !seen {
			var err error
			if g, err = s.ownerGone(ctx, owner); err != nil {
				return false, err
			}
			gone[owner] = g
		}
		return g, nil
	}
	cs, err := s.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return fmt.Errorf("listing the containers of other devnets: %w", err)
	}
	var errs []error
	for _, c := range cs {
		o, err := orphan(c.Labels)
		if err != nil {
			return err
		}
		if !o {
			continue
		}
		s.log.Info("removing a container a devnet that is gone left", "container", strings.Join(c.Names, ","), "instance", c.Labels[labelInstance], "owner", c.Labels[labelOwner])
		if c.HostConfig.NetworkMode != "" && c.HostConfig.NetworkMode != "none" {
			s.docker.markVPN(c.ID) // its removal leaves a VPN network: one at a time (engine)
		}
		err = s.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		if errors.Is(err, enginecall.ErrHung) {
			return fmt.Errorf("removing container %s: %w", c.ID[:12], err)
		}
		if err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID[:12], err))
		}
	}
	ns, err := s.docker.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("listing the networks of other devnets: %w", err)
	}
	var ids []string
	// Networks only older devnets made (legacynet.go): a macvlan network before the bridge it hangs off.
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].Driver == "macvlan" && ns[j].Driver != "macvlan" })
	for _, n := range ns {
		o, err := orphan(n.Labels)
		if err != nil {
			return err
		}
		if o {
			s.log.Info("removing a network a devnet that is gone left", "network", n.Name, "instance", n.Labels[labelInstance], "owner", n.Labels[labelOwner])
			ids = append(ids, n.ID)
		}
	}
	if len(ids) > 0 {
		if err := s.removeStuckNetworks(ctx, ids); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
