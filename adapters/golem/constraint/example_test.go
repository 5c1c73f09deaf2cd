package constraint_test

import (
	"fmt"

	"github.com/gcompose/gcompose/adapters/golem/constraint"
)

func ExampleParse() {
	e, err := constraint.Parse("(& (golem.inf.mem.gib >= 4) (golem.runtime.capabilities=vpn) (!(golem.node.debug.subnet=private*)))")
	if err != nil {
		panic(err)
	}
	offer := map[string]any{
		"golem.inf.mem.gib":          8.0,
		"golem.runtime.capabilities": []any{"inet", "vpn"},
		"golem.node.debug.subnet":    "public",
	}
	fmt.Println(e)
	fmt.Println(e.Match(offer))
	// Output:
	// (&(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn)(!(golem.node.debug.subnet=private*)))
	// true
}

func ExampleParse_error() {
	_, err := constraint.Parse("(&(golem.inf.mem.gib>=4)")
	fmt.Println(err)
	// Output:
	// constraint: unexpected end of input, group opened at offset 0 is not closed at offset 24
}

func ExampleFromGAP16() {
	f, err := constraint.FromGAP16([]string{"golem.inf.cpu.cores=2", "golem.inf.mem.gib>=4"}, []string{"vpn"})
	if err != nil {
		panic(err)
	}
	fmt.Println(f)
	// Output:
	// (&(golem.inf.cpu.cores=2)(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn))
}

func ExampleMatches() {
	demand := map[string]any{"golem.srv.comp.expiration": 1763800000000}
	offer := map[string]any{"golem.inf.cpu.cores": 4, "golem.runtime.name": "vm"}
	ok, err := constraint.Matches(demand, "(&(golem.inf.cpu.cores>=2)(golem.runtime.name=vm))", offer, "(golem.srv.comp.expiration>0)")
	fmt.Println(ok, err)
	// Output:
	// true <nil>
}
