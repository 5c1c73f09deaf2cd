package lowering

import (
	"strings"

	"github.com/gcompose/gcompose/core/address"
)

var _ interface{ Implicit(string) bool } = Golem{}

// Implicit tells the resources the Golem lowering adds of its own
// (core/lower.Implicit): the payments resource and the local proxies, whose
// state the outputs section may read (${resources.golem-proxy-web.state.url}).
func (Golem) Implicit(resource string) bool {
	name := address.Resource(resource)
	return name == PaymentsResource || strings.HasPrefix(name, proxyPrefix)
}
