// Package descriptor loads application descriptors (GAP-16, dapp-runner and
// Deployster-style generic resources), merges and validates them, and
// normalizes them into one model: App. Everything after loading (references,
// the graph, planning) reads App and nothing else.
package descriptor

import (
	"strings"

	"github.com/gcompose/gcompose/core/source"
)

// App is the normalized application: one canonical form whichever dialect,
// shorthand or set of files it was written in. dapp-runner `nodes` are
// Services here; init shorthands are Commands.
type App struct {
	// Name identifies the application in state, labels and locks. It comes
	// from meta.name (sanitized to a DNS label) or, failing that, the first
	// descriptor file's base name.
	Name      string
	Meta      map[string]any
	Payloads  map[string]*Payload
	Networks  map[string]*Network
	Services  map[string]*Service
	Plugs     map[string]*Plug
	Resources map[string]*Resource
	// Secrets are the declared secrets (${secret.NAME}); their values are
	// read by core/resolve, never stored here.
	Secrets map[string]*Secret
	// Outputs are values printed after deploy (name -> value, usually a
	// ${...} reference to what a resource reports).
	Outputs map[string]any
	// Budget caps what the application may spend (budget:); nil when the
	// descriptor sets none. gcompose reconcile enforces it.
	Budget *Budget

	// Files are the descriptor files merged, in merge order.
	Files []string
	// Positions maps a JSON pointer into Tree() (e.g.
	// "/services/web/init/0/run/args/2") to where that value was written; for
	// merged values, the file that set it last.
	Positions map[string]source.Pos
	// Warnings found while loading (unknown keys under --ignore-unknown,
	// ignored package sub-folders, ...).
	Warnings source.Diagnostics
}

// Budget is the descriptor's spend limits, in the currency the adapters
// report costs in; zero means no limit.
type Budget struct {
	// PerHour caps the application's cost per hour once a replacement runs.
	PerHour float64
	// Total caps what the application has spent plus a replacement's whole
	// agreement.
	Total float64
	Pos   source.Pos
}

// Payload is what a service runs (GAP-16 payloads).
type Payload struct {
	Name         string
	Runtime      string
	Constraints  []string
	Capabilities []string
	Params       map[string]any
	// Build is the payload's build context (build: as written), and
	// BuildDir the directory it names, relative to the descriptor file
	// that wrote it, as Compose reads build:. Empty without build:.
	Build    string
	BuildDir string
	Pos      source.Pos
}

// Network is a VPN the services join.
type Network struct {
	Name string
	// IP is the network in CIDR form as written by the user (host/prefix is
	// kept: "192.168.0.1/24" names the same network as "192.168.0.0/24").
	IP      string
	OwnerIP string
	Mask    string
	Gateway string
	Pos     source.Pos
}

// Service is one GAP-16 service or dapp-runner node.
type Service struct {
	Name      string
	Payload   string
	Network   string
	IP        []string
	DependsOn []string
	Init      []Command
	Instances int // always >= 1 after normalization
	HTTPProxy *Proxy
	TCPProxy  *Proxy
	// Protect refuses plans that would delete or rebuild the service.
	Protect bool
	Pos     source.Pos
}

// Command is one init step. Every shorthand (a bare argv list, run: [...],
// run: {args: [...]}) normalizes to Run.Args.
type Command struct {
	Run *RunCommand
}

type RunCommand struct {
	EntryPoint string
	Args       []string
}

// Proxy exposes service ports on the requestor's machine.
type Proxy struct {
	Ports []PortMapping
}

// PortMapping is "80" (Local 0: picked at runtime) or "8080:80".
type PortMapping struct {
	Local  int
	Remote int
}

// Plug is a host path offered to adapter containers (Deployster plugs).
type Plug struct {
	Name          string
	Path          string
	ReadOnly      bool
	ResourceNames []string // regular expressions
	ResourceTypes []string // regular expressions
	Pos           source.Pos
}

// Resource is a generic, Deployster-style resource driven by a third-party
// adapter image.
type Resource struct {
	Name         string
	Type         string            // adapter image reference
	Dependencies map[string]string // alias -> resource name
	Config       map[string]any
	// Protect refuses plans that would delete or rebuild the resource.
	Protect bool
	// CreateBeforeDestroy asks the adapter to create a rebuild's
	// replacement before it removes what exists.
	CreateBeforeDestroy bool
	Pos                 source.Pos
}

// Secret declares where a secret's value is read from: exactly one of Env
// (an environment variable of the gcompose process) and File (a path,
// relative to the descriptor that declares it).
type Secret struct {
	Name string
	Env  string
	File string
	Pos  source.Pos
}

// Pos returns where the value at the JSON pointer was written, or the position
// of its nearest ancestor that has one.
func (a *App) Pos(pointer string) source.Pos {
	for {
		if p, ok := a.Positions[pointer]; ok {
			return p
		}
		i := strings.LastIndexByte(pointer, '/')
		if i < 0 {
			return source.Pos{}
		}
		pointer = pointer[:i]
	}
}
