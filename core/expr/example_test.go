package expr_test

import (
	"fmt"

	"github.com/gcompose/gcompose/core/expr"
)

func Example() {
	t, err := expr.Parse("--db=${services.db-service.network_node.ip}:${var.port} $${HOME}")
	if err != nil {
		panic(err)
	}
	for _, r := range t.Refs() {
		fmt.Println(r.String(), "at offset", r.Offset)
	}
	values := map[string]any{"var.port": 4001}
	lookup := func(r expr.Ref) (any, bool, error) {
		v, ok := values[r.String()]
		return v, ok, nil
	}
	// Before apply: the runtime reference is kept, the rest substituted.
	v, unknown, _ := t.Partial(lookup, nil)
	fmt.Println(v, len(unknown))
	// At apply: everything known.
	values["services.db-service.network_node.ip"] = "192.168.0.2"
	v, _ = t.Eval(lookup)
	fmt.Println(v)
	// Output:
	// services.db-service.network_node.ip at offset 5
	// var.port at offset 44
	// --db=${services.db-service.network_node.ip}:4001 $${HOME} 1
	// --db=192.168.0.2:4001 ${HOME}
}
