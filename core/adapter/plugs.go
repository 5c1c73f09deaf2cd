package adapter

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
)

// Plug is a host path the descriptor offers to adapter containers.
type Plug struct {
	Path     string
	ReadOnly bool
	// ResourceNames and ResourceTypes are regular expressions matched at the
	// start of the resource's name as written in the descriptor
	// (address.AdapterName: n0, not resources.n0) / the image reference:
	// Python's re.match on the manifest key, as in Deployster. A plug with
	// neither is offered to every resource.
	ResourceNames []string
	ResourceTypes []string
	// Err, when not nil, is why the plug cannot be mounted here (a
	// lowering's plug of the engine's socket when DOCKER_HOST names no
	// socket): an adapter that requires it fails with it, one that may do
	// without it runs without it.
	Err error
}

// mountsFor picks the plugs to mount: those the adapter declared that the
// descriptor defines and that apply to the resource, read-only unless both
// the descriptor's plug is writable and the adapter wants it writable. A
// plug the adapter requires that cannot be mounted is an error; an optional
// one is skipped. Nothing else is ever mounted (not the Docker socket, not
// the workspace).
func mountsFor(info *Info, t Target) ([]runner.Mount, error) {
	names := make([]string, 0, len(info.Init.Plugs))
	for name := range info.Init.Plugs {
		names = append(names, name)
	}
	sort.Strings(names)
	var mounts []runner.Mount
	for _, name := range names {
		want := info.Init.Plugs[name]
		p, ok := t.Plugs[name]
		if !ok {
			if want.Optional {
				continue
			}
			return nil, plan.Named(t.Name, fmt.Errorf("adapter %s requires plug %q, which the descriptor does not define (add it under plugs:)", t.Image, name))
		}
		// Patterns name resources as the descriptor writes them, even one
		// whose adapter still receives the address it was created under.
		allowed, err := p.allows(address.AdapterName(t.Name), t.Image)
		if err != nil {
			return nil, plan.Named(t.Name, fmt.Errorf("plug %q: %w", name, err))
		}
		if !allowed {
			if want.Optional {
				continue
			}
			return nil, plan.Named(t.Name, fmt.Errorf("adapter %s requires plug %q, which the descriptor does not allow for this resource (resource_names/resource_types)", t.Image, name))
		}
		if p.Err != nil {
			if want.Optional {
				continue
			}
			return nil, plan.Named(t.Name, fmt.Errorf("adapter %s requires plug %q: %w", t.Image, name, p.Err))
		}
		if p.ReadOnly && want.IsWritable() && !want.Optional {
			return nil, plan.Named(t.Name, fmt.Errorf("adapter %s requires plug %q writable, but the descriptor makes it read_only", t.Image, name))
		}
		if p.ReadOnly && want.IsWritable() {
			continue
		}
		if p.Path == "" {
			return nil, plan.Named(t.Name, fmt.Errorf("plug %q has no path", name))
		}
		mounts = append(mounts, runner.Mount{HostPath: p.Path, ContainerPath: want.ContainerPath, ReadOnly: p.ReadOnly || !want.IsWritable()})
	}
	return mounts, nil
}

// allows tells whether the plug applies to a resource: Deployster's rule (a
// name pattern or a type pattern matches at the start; no pattern at all
// means every resource).
func (p Plug) allows(name, typ string) (bool, error) {
	if len(p.ResourceNames) == 0 && len(p.ResourceTypes) == 0 {
		return true, nil
	}
	for _, set := range []struct {
		pats []string
		s    string
		what string
	}{{p.ResourceNames, name, "resource_names"}, {p.ResourceTypes, typ, "resource_types"}} {
		for _, pat := range set.pats {
			re, err := regexp.Compile(`^(?:` + pat + `)`)
			if err != nil {
				return false, fmt.Errorf("%s: bad regular expression %q: %w", set.what, pat, err)
			}
			if re.MatchString(set.s) {
				return true, nil
			}
		}
	}
	return false, nil
}
