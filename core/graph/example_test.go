package graph_test

import (
	"context"
	"fmt"
	"os"

	"github.com/gcompose/gcompose/core/graph"
	"github.com/gcompose/gcompose/core/source"
)

func Example() {
	g := graph.New()
	for _, id := range []string{"networks.default", "services.db", "services.web"} {
		g.AddVertex(id, "service", nil)
	}
	_ = g.AddEdge(graph.Edge{From: "services.db", To: "networks.default", Kind: graph.Network})
	_ = g.AddEdge(graph.Edge{From: "services.web", To: "services.db", Kind: graph.Reference,
		Reason: "${services.db.network_node.ip}", Pos: source.Pos{File: "app.yaml", Line: 12, Col: 30}})

	order, _ := g.TopoOrder()
	fmt.Println(order)

	res, err := graph.Walk(context.Background(), g, 10, true /* destroy order */, func(ctx context.Context, id string) error {
		if id == "services.db" {
			return fmt.Errorf("adapter exited 1")
		}
		return nil
	})
	fmt.Println(err)
	for _, id := range []string{"services.web", "services.db", "networks.default"} {
		fmt.Println(id, res.Outcomes[id])
	}
	_ = g.WriteDOT(os.Stdout)
	// Output:
	// [networks.default services.db services.web]
	// services.db: adapter exited 1
	// services.web done
	// services.db failed: adapter exited 1
	// networks.default skipped because services.db failed
	// digraph gcompose {
	//   rankdir="BT";
	//   node [shape=box];
	//   "networks.default" [label="networks.default"];
	//   "services.db" [label="services.db"];
	//   "services.web" [label="services.web"];
	//   "services.db" -> "networks.default" [label="network"];
	//   "services.web" -> "services.db" [label="${services.db.network_node.ip} at app.yaml:12:30"];
	// }
}
