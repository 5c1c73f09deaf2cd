package runner

// Container housekeeping: the gcompose containers left on the Engine (a
// call in flight, the remains of a crash, what adapters started to outlive
// the run), finding them, and removing them. Running a call is runner.go.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// Container is a gcompose container found on the Engine.
type Container struct {
	ID       string
	Name     string
	Image    string
	App      string
	Resource string
	Call     string
	State    string
	Created  time.Time
	// Lock and LockScope: the state lock of the run that started it (empty:
	// started without one, e.g. by gcompose logs, or by an older gcompose).
	Lock, LockScope string
	// Lineage is the state lineage an adapter labelled it with
	// (gcompose.lineage), if any.
	Lineage string
	// Adapter is the adapter image that started it to outlive the run
	// (gcompose.adapter), if it says.
	Adapter string
}

// LabelLineage is the label adapters put the state's lineage in.
const LabelLineage = "gcompose.lineage"

// LabelAdapter is the label an adapter puts its own image in on the
// containers it starts to outlive the run: its sweep accounts for them.
const LabelAdapter = "gcompose.adapter"

// Leftovers lists the gcompose containers of an application that still
// exist (a call in flight, or the remains of a crash), oldest first.
func (r *Runner) Leftovers(ctx context.Context, app string) ([]Container, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"), filters.Arg("label", LabelApp+"="+app))
	list, err := r.containerList(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list containers of app %s: %w", app, err)
	}
	out := make([]Container, 0, len(list))
	for _, c := range list {
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		out = append(out, Container{ID: c.ID, Name: name, Image: c.Image, App: c.Labels[LabelApp],
			Resource: c.Labels[LabelResource], Call: c.Labels[LabelCall], State: c.State, Created: time.Unix(c.Created, 0),
			Lock: c.Labels[LabelLock], LockScope: c.Labels[LabelLockScope]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Own records that this Runner works for the run holding the state lock
// lockID (in scope, see state.Lock) of app: the containers it starts for
// app from now on carry both, and Cleanup may remove those of earlier
// holders of the same lock.
func (r *Runner) Own(app, scope, lockID string) {
	r.mu.Lock()
	r.owner = &owner{app: app, scope: scope, lockID: lockID}
	r.mu.Unlock()
}

// Cleanup force-removes the containers of app that earlier holders of the
// lock this Runner's run holds (Own) left behind, and returns how many. Only
// they are provably abandoned: their lock is now held by this run. A
// container of another lock (another state of the same application), or
// without one (gcompose logs, an older gcompose), may belong to a live run
// and is left alone. Without Own, nothing is removed.
func (r *Runner) Cleanup(ctx context.Context, app string) (int, error) {
	r.mu.Lock()
	o := r.owner
	r.mu.Unlock()
	if o == nil || o.app != app || o.scope == "" {
		return 0, nil
	}
	list, err := r.Leftovers(ctx, app)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, c := range list {
		if c.LockScope != o.scope || c.Lock == "" || c.Lock == o.lockID {
			continue
		}
		if err := r.remove(ctx, c.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s (%s %s): %w", shortID(c.ID), c.Resource, c.Call, err))
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("cleanup of app %s: %w", app, errors.Join(errs...))
	}
	return n, nil
}

// Objects lists the containers labelled gcompose.app=app other than
// gcompose's own adapter calls: what adapters started to outlive the run
// (the Golem payments keeper, local proxies), oldest first. A first deploy
// that finds any would make a second copy of the application.
func (r *Runner) Objects(ctx context.Context, app string) ([]Container, error) {
	f := filters.NewArgs(filters.Arg("label", LabelApp+"="+app))
	list, err := r.containerList(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("list containers of app %s: %w", app, err)
	}
	var out []Container
	for _, c := range list {
		if c.Labels[LabelManaged] == "true" {
			continue
		}
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Container{ID: c.ID, Name: name, Image: c.Image, App: app, Resource: c.Labels[LabelResource],
			State: c.State, Created: time.Unix(c.Created, 0), Lineage: c.Labels[LabelLineage], Adapter: c.Labels[LabelAdapter]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// Describe is the container in a sentence, for messages.
func (c Container) Describe() string {
	s := "container " + c.Name
	if c.Name == "" {
		s = "container " + c.ID[:min(12, len(c.ID))]
	}
	var about []string
	if c.Resource != "" {
		about = append(about, "resource "+c.Resource)
	}
	if c.State != "" {
		about = append(about, c.State)
	}
	if c.Lineage != "" {
		about = append(about, "state lineage "+c.Lineage)
	}
	about = append(about, "image "+c.Image)
	return s + " (" + strings.Join(about, ", ") + ")"
}

// remove force-removes a container and returns once it is gone. An engine
// may refuse while the container is exiting or already being removed
// (Docker: "removal already in progress"; Podman: "container state
// improper"), so while the container is still there it retries, until ctx
// ends; the last refusal is the error. An engine that cannot say whether
// the container is there (gone itself) ends it at once.
func (r *Runner) remove(ctx context.Context, id string) error {
	// Short at first: a served adapter's container, auto-removed as it
	// exits, is gone some 30 ms after its stdin closes, and a first wait
	// of 50 ms made every run's end wait that long for nothing.
	wait := 5 * time.Millisecond
	host, bound := r.cli.DaemonHost(), r.removeBound()
	for {
		err := enginecall.Call(ctx, host, "ContainerRemove", shortID(id), bound, func(ctx context.Context) error {
			return r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		})
		if err == nil || client.IsErrNotFound(err) {
			return nil
		}
		if errors.Is(err, enginecall.ErrHung) {
			// Asking again would wait as long for nothing.
			return fmt.Errorf("remove container %s: %w", shortID(id), err)
		}
		_, ierr := enginecall.Get(ctx, host, "ContainerInspect", shortID(id), bound, func(ctx context.Context) (container.InspectResponse, error) {
			return r.cli.ContainerInspect(ctx, id)
		})
		if client.IsErrNotFound(ierr) {
			return nil // removed meanwhile (auto-remove, another run)
		} else if ierr != nil {
			return fmt.Errorf("remove container %s: %w", shortID(id), errors.Join(err, ierr))
		}
		r.log.Debug("remove container: retrying", "container", id, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove container %s: %w", shortID(id), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
