package expr

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		refs    []string // canonical paths
		literal bool
		single  bool
	}{
		{in: "plain", literal: true},
		{in: "", literal: true},
		{in: "$5 and $ {x} and $$", literal: true},
		{in: "$${not.a.ref}", literal: true},
		{in: "${services.db-service.network_node.ip}", refs: []string{"services.db-service.network_node.ip"}, single: true},
		{in: "${ var.port }", refs: []string{"var.port"}, single: true},
		{in: "ip=${services.web[1].network_node.ip}:${var.port_num}", refs: []string{"services.web[1].network_node.ip", "var.port_num"}},
		{in: "${services.db.ip[0]}", refs: []string{"services.db.ip[0]"}, single: true},
		{in: "${a.b[0][2].c}", refs: []string{"a.b[0][2].c"}, single: true},
		{in: "$${x} ${y}", refs: []string{"y"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tpl, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range tpl.Refs() {
				got = append(got, r.String())
			}
			if !reflect.DeepEqual(got, tt.refs) {
				t.Errorf("refs = %q, want %q", got, tt.refs)
			}
			if tpl.IsLiteral() != tt.literal || tpl.IsSingleRef() != tt.single {
				t.Errorf("literal=%v single=%v, want %v %v", tpl.IsLiteral(), tpl.IsSingleRef(), tt.literal, tt.single)
			}
		})
	}
}

func TestParseRefOffsetAndSteps(t *testing.T) {
	tpl, err := Parse("ab ${services.web[1].ip}")
	if err != nil {
		t.Fatal(err)
	}
	r := tpl.Refs()[0]
	if r.Offset != 3 {
		t.Errorf("offset = %d, want 3", r.Offset)
	}
	want := []Step{{Name: "services"}, {Name: "web"}, {Index: 1, IsIndex: true}, {Name: "ip"}}
	if !reflect.DeepEqual(r.Path, want) {
		t.Errorf("path = %+v", r.Path)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in     string
		offset int
		msg    string
	}{
		{"abc ${services.db", 4, `unterminated "${"`},
		{"x ${}", 2, `empty reference`},
		{"x ${  }", 2, `empty reference`},
		{"${a..b}", 4, `expected a name`},
		{"${a.}", 4, `ends with "."`},
		{"${a b}", 3, `unexpected ' '`},
		{"${a[x]}", 3, `index "x"`},
		{"${a[-1]}", 3, `index "-1"`},
		{"${a[1}", 3, `unterminated "["`},
		{"${.a}", 2, `expected a name`},
		{"${a/b}", 3, `unexpected '/'`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want *SyntaxError", err)
			}
			if se.Offset != tt.offset || !strings.Contains(se.Msg, tt.msg) {
				t.Errorf("got offset %d %q, want %d %q", se.Offset, se.Msg, tt.offset, tt.msg)
			}
		})
	}
}

func mapLookup(vals map[string]any) Lookup {
	return func(r Ref) (any, bool, error) {
		if r.String() == "bad.ref" {
			return nil, false, errors.New("no such thing")
		}
		v, ok := vals[r.String()]
		return v, ok, nil
	}
}

func TestEval(t *testing.T) {
	vals := map[string]any{
		"var.port":  8080,
		"var.name":  "web",
		"ips":       []any{"10.0.0.1", "10.0.0.2"},
		"var.ratio": 0.5,
		"var.on":    true,
		"var.null":  nil,
		"var.m":     map[string]any{"a": 1},
		"var.cmd":   map[string]any{"run": `a > b && c < d "q"`},
	}
	tests := []struct {
		in   string
		want any
	}{
		{"${var.port}", 8080},
		{"${ips}", []any{"10.0.0.1", "10.0.0.2"}},
		{"port ${var.port}", "port 8080"},
		{"${var.name}-${var.port}", "web-8080"},
		{"${ips}!", `["10.0.0.1","10.0.0.2"]!`},
		{"${var.ratio}/${var.on}/${var.null}/${var.m}", `0.5/true//{"a":1}`},
		{"$${var.port} is ${var.port}", "${var.port} is 8080"},
		{"$${x}", "${x}"},
		// JSON as typed: the adapter gets ">", not "\u003e".
		{"cmd=${var.cmd}", `cmd={"run":"a > b && c < d \"q\""}`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			tpl, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Eval(mapLookup(vals))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestEvalUnknownAndErrors(t *testing.T) {
	tpl, _ := Parse("a ${var.x} b")
	_, err := tpl.Eval(mapLookup(nil))
	var ue *UnknownError
	if !errors.As(err, &ue) || len(ue.Refs) != 1 || ue.Refs[0].String() != "var.x" {
		t.Fatalf("err = %v", err)
	}
	tpl, _ = Parse("a ${bad.ref}")
	_, err = tpl.Eval(mapLookup(nil))
	if err == nil || !strings.Contains(err.Error(), "${bad.ref}: no such thing") {
		t.Fatalf("err = %v", err)
	}
}

func TestPartialKeepsUnknownAndEscapes(t *testing.T) {
	vals := map[string]any{"var.a": "x${y}"}
	tpl, _ := Parse("$${lit} ${var.a} ${services.db.network_node.ip}")
	got, unknown, err := tpl.Partial(mapLookup(vals), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "$${lit} x$${y} ${services.db.network_node.ip}"
	if got != want || len(unknown) != 1 {
		t.Fatalf("got %q %v, want %q", got, unknown, want)
	}
	// Evaluating the kept template later gives the same literal text.
	tpl2, err := Parse(got.(string))
	if err != nil {
		t.Fatal(err)
	}
	final, err := tpl2.Eval(mapLookup(map[string]any{"services.db.network_node.ip": "10.0.0.3"}))
	if err != nil {
		t.Fatal(err)
	}
	if final != "${lit} x${y} 10.0.0.3" {
		t.Errorf("final = %q", final)
	}
	// keep rewrites unknown references.
	got, _, _ = tpl.Partial(mapLookup(vals), func(r Ref) string { return "<" + r.String() + ">" })
	if got != "$${lit} x$${y} <services.db.network_node.ip>" {
		t.Errorf("keep: got %q", got)
	}
}

func TestEvalTree(t *testing.T) {
	tree := map[string]any{
		"args":  []any{"--db", "${services.db.network_node.ip}", "--port=${var.port}"},
		"ports": "${var.ports}",
		"n":     3,
		"lit":   "$${x}",
		"a/b":   map[string]any{"c": "${var.missing} and ${var.port}"},
	}
	vals := map[string]any{"var.port": 80, "var.ports": []any{80, 443}}
	out, unknown, err := EvalTree(tree, mapLookup(vals))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"args":  []any{"--db", "${services.db.network_node.ip}", "--port=80"},
		"ports": []any{80, 443},
		"n":     3,
		"lit":   "${x}",
		"a/b":   map[string]any{"c": "${var.missing} and 80"},
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("tree = %#v", out)
	}
	var got []string
	for _, u := range unknown {
		got = append(got, u.Pointer+" "+u.Ref.String())
	}
	wantU := []string{"/a~1b/c var.missing", "/args/1 services.db.network_node.ip"}
	if !reflect.DeepEqual(got, wantU) {
		t.Errorf("unknown = %q, want %q", got, wantU)
	}
	if tree["ports"] != "${var.ports}" {
		t.Error("input tree modified")
	}
	_, _, err = EvalTree(map[string]any{"x": []any{"${oops"}}, mapLookup(nil))
	if err == nil || !strings.Contains(err.Error(), "/x/0: offset 0: unterminated") {
		t.Errorf("err = %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"${a.b[0]}", "$${x}", "a ${b", "${services.db-service.network_node.ip} x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := Parse(s)
		if err != nil {
			return
		}
		// Rendering every reference back as text then reparsing gives the same refs.
		out, _, err := tpl.Partial(func(Ref) (any, bool, error) { return nil, false, nil }, nil)
		if err != nil {
			t.Fatal(err)
		}
		if str, ok := out.(string); ok && !tpl.IsLiteral() {
			again, err := Parse(str)
			if err != nil {
				t.Fatalf("reparse %q: %v", str, err)
			}
			if len(again.Refs()) != len(tpl.Refs()) {
				t.Fatalf("refs changed: %q -> %q", s, str)
			}
		}
	})
}
