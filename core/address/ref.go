package address

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/expr"
)

// Ref is the text of a reference to path (as written after the address)
// of the thing at addr: Ref("services.web[1]", "network_node.ip") is
// ${services.web[1].network_node.ip}.
func Ref(addr, path string) string { return "${" + addr + "." + path + "}" }

// OutputRef is the text of a reference to the output named output of the
// thing at addr: a resource's outputs are under its state
// (${resources.x.state.path}), a service's and a network's are its own
// fields (${networks.n.network_id}).
func OutputRef(addr, output string) string {
	if strings.HasPrefix(addr, Resources+".") {
		return Ref(addr, "state."+output)
	}
	return Ref(addr, output)
}

// ParseOutput splits the path of a runtime reference (text is how it is
// written, for errors) into the address whose outputs it reads and the
// path inside those outputs (the adapter's VALID state):
//
//	services.db.network_node.ip    -> services.db,      network_node.ip
//	nodes.db.network_node.ip       -> services.db,      network_node.ip (dapp-runner's name)
//	services.web[1].agreement.id   -> services.web[1],  agreement.id
//	networks.default.network_id    -> networks.default, network_id
//	resources.files.state.sha256   -> resources.files,  sha256
func ParseOutput(text string, p []expr.Step) (string, []expr.Step, error) {
	if len(p) < 3 || p[0].IsIndex || p[1].IsIndex {
		return "", nil, fmt.Errorf("%s does not name a resource output", text)
	}
	root := p[0].Name
	if root == "nodes" {
		root = Services
	}
	addr := root + "." + p[1].Name
	rest := p[2:]
	if rest[0].IsIndex {
		addr += "[" + strconv.Itoa(rest[0].Index) + "]"
		rest = rest[1:]
	}
	switch root {
	case Services, Networks:
	case Resources:
		if len(rest) == 0 || rest[0].IsIndex || rest[0].Name != "state" {
			return "", nil, fmt.Errorf("%s: only resources.<name>.state.* is known at apply time", text)
		}
		rest = rest[1:]
	default:
		return "", nil, fmt.Errorf("%s does not name a resource output", text)
	}
	if len(rest) == 0 {
		return "", nil, fmt.Errorf("%s names a whole resource, not one of its outputs", text)
	}
	return addr, rest, nil
}
