// Package address formats and parses the addresses gcompose gives what it
// deploys — services.web, services.web[1], networks.net, resources.files —
// and the name an adapter receives for each (docs/protocol.md, "name").
//
// The address is gcompose's key: in the state, in plans, in --target and
// in references. The adapter name is what Deployster sends as a request's
// name: the resource's key as written in the descriptor, so an adapter
// moved from Deployster finds the objects it named before. Services,
// networks and instances follow the same rule; an instance of a service
// with several adds "-<index>", which a DNS label, a container name and
// most cloud resource names can hold.
package address

import (
	"fmt"
	"strconv"
	"strings"
)

// Sections of an address: the descriptor's top-level sections that hold
// things to deploy.
const (
	Services  = "services"
	Networks  = "networks"
	Resources = "resources"
)

// Address is one parsed address.
type Address struct {
	Section string // Services, Networks or Resources
	Name    string // the key in that section, as written
	// Index is the instance index when Indexed (services.web[1]).
	Index   int
	Indexed bool
}

// Service is the address of instance index of a service with instances
// instances: services.web when it has one, services.web[1] otherwise.
func Service(name string, index, instances int) string {
	if instances <= 1 {
		return Services + "." + name
	}
	return Services + "." + name + "[" + strconv.Itoa(index) + "]"
}

// Network and Resource are the addresses of a network and a resource.
func Network(name string) string  { return Networks + "." + name }
func Resource(name string) string { return Resources + "." + name }

// String formats a.
func (a Address) String() string {
	s := a.Section + "." + a.Name
	if a.Indexed {
		s += "[" + strconv.Itoa(a.Index) + "]"
	}
	return s
}

// AdapterName is the name an adapter receives for a: the descriptor's key,
// with "-<index>" for an instance of a multi-instance service.
func (a Address) AdapterName() string {
	if a.Indexed {
		return a.Name + "-" + strconv.Itoa(a.Index)
	}
	return a.Name
}

// Parse reads an address: a section, a dot, a name, and for services an
// optional [index].
func Parse(s string) (Address, error) {
	section, rest, ok := strings.Cut(s, ".")
	if !ok {
		return Address{}, fmt.Errorf("address %q: want services.NAME, services.NAME[i], networks.NAME or resources.NAME", s)
	}
	switch section {
	case Services, Networks, Resources:
	default:
		return Address{}, fmt.Errorf("address %q: %q is not services, networks or resources", s, section)
	}
	a := Address{Section: section, Name: rest}
	if open := strings.IndexByte(rest, '['); open >= 0 {
		if section != Services || !strings.HasSuffix(rest, "]") {
			return Address{}, fmt.Errorf("address %q: only a service takes an [index]", s)
		}
		i, err := strconv.Atoi(rest[open+1 : len(rest)-1])
		if err != nil || i < 0 || strconv.Itoa(i) != rest[open+1:len(rest)-1] {
			return Address{}, fmt.Errorf("address %q: the index must be a number (services.NAME[0])", s)
		}
		a.Name, a.Index, a.Indexed = rest[:open], i, true
	}
	if a.Name == "" || strings.ContainsAny(a.Name, ".[]") {
		return Address{}, fmt.Errorf("address %q: no name after %s.", s, section)
	}
	return a, nil
}

// AdapterName is the name an adapter receives for the thing at addr; a
// string that is no address (a state written by hand, a test's key) is
// sent as it is.
func AdapterName(addr string) string {
	a, err := Parse(addr)
	if err != nil {
		return addr
	}
	return a.AdapterName()
}
