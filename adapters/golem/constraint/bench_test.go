package constraint

import (
	"strings"
	"testing"
)

const benchFilter = "(&(golem.inf.mem.gib>=4)(golem.inf.cpu.cores>=2)(golem.runtime.name=vm)" +
	"(golem.runtime.capabilities=vpn)(!(golem.node.debug.subnet=private*))" +
	"(|(golem.inf.cpu.threads>=16)(golem.inf.storage.gib>=20))(golem.runtime.version@v>=0.2.0))"

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		if _, err := Parse(benchFilter); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEval(b *testing.B) {
	e := mustParse(benchFilter)
	props := map[string]any{
		"golem.inf.mem.gib": 8.0, "golem.inf.cpu.cores": 4.0, "golem.inf.cpu.threads": 8.0,
		"golem.inf.storage.gib": 40.0, "golem.runtime.name": "vm", "golem.runtime.version@v": "0.3.0",
		"golem.runtime.capabilities": []any{"inet", "vpn"}, "golem.node.debug.subnet": "public",
	}
	for b.Loop() {
		if !e.Match(props) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParseWide(b *testing.B) {
	in := "(&" + strings.Repeat("(golem.inf.cpu.cores>=2)", 1000) + ")"
	for b.Loop() {
		if _, err := Parse(in); err != nil {
			b.Fatal(err)
		}
	}
}
