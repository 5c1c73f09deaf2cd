package constraint

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseCanonical(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"()", "()"},
		{"( )", "()"},
		{"(a=1)", "(a=1)"},
		{"( a = 1 )", "(a=1)"},
		{"(golem.inf.mem.gib>=4)", "(golem.inf.mem.gib>=4)"},
		{"(a<=1)", "(a<=1)"},
		{"(a<1)", "(a<1)"},
		{"(a>1)", "(a>1)"},
		{"(a<>1)", "(a<>1)"},
		{"(a=*)", "(a=*)"},
		{"(a=* )", "(a=*)"},
		{"(a=foo*)", "(a=foo*)"},
		{"(&(a=1)(b=2))", "(&(a=1)(b=2))"},
		{"(& (a=1) (b=2) )", "(&(a=1)(b=2))"},
		{"(&\n  (a=1)\n  (b=2)\n)", "(&(a=1)(b=2))"},
		{"(|(a=1)(b=2))", "(|(a=1)(b=2))"},
		{"(!(a=1))", "(!(a=1))"},
		{"( ! (a=1) )", "(!(a=1))"},
		{"(&)", "(&)"},
		{"(|)", "(|)"},
		{"(&(|(a=1)(!(b=*)))())", "(&(|(a=1)(!(b=*)))())"},
		{"  (a=1)  ", "(a=1)"},
		{"(golem.runtime.version@v>=0.2.0)", "(golem.runtime.version@v>=0.2.0)"},
		{"(a=hello world)", "(a=hello world)"},
		{"(a=[x,y])", "(a=[x,y])"},
		{"(a==1)", "(a==1)"}, // value "=1", as yagna takes everything after the operator
		{"(golem.node.id.name=my-node_1)", "(golem.node.id.name=my-node_1)"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			e, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if got := e.String(); got != tt.want {
				t.Fatalf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
			}
			// canonical form is a fixed point
			e2, err := Parse(e.String())
			if err != nil {
				t.Fatalf("reparse %q: %v", e.String(), err)
			}
			if e2.String() != e.String() {
				t.Fatalf("not a fixed point: %q -> %q", e.String(), e2.String())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		offset  int
		msgPart string
	}{
		{"", 0, "empty input"},
		{"   ", 3, "empty input"},
		{"a=1", 0, "expected '('"},
		{"(", 1, "end of input"},
		{"(a=1", 4, "not closed"},
		{"(&(a=1)", 7, "not closed"},
		{"(a=1))", 5, "trailing"},
		{"(a=1)(b=2)", 5, "trailing"},
		{"(=1)", 1, "empty property"},
		{"(a)", 2, "expected an operator"},
		{"(a~=1)", 2, "unsupported operator '~'"},
		{"(a=)", 2, "missing value"},
		{"(a b=1)", 2, "whitespace inside property"},
		{"(!(a=1)(b=2))", 7, "expected ')'"},
		{"(!)", 2, "expected '('"},
		{"(!", 2, "end of input"},
		{"(&a=1)", 2, "expected '('"},
		{"(a=(b))", 3, "unexpected '('"},
		{"(a(=1)", 2, "expected an operator"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error", tt.in)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *ParseError", err)
			}
			if pe.Offset != tt.offset {
				t.Errorf("offset = %d, want %d (%v)", pe.Offset, tt.offset, err)
			}
			if !strings.Contains(err.Error(), tt.msgPart) {
				t.Errorf("error %q does not contain %q", err, tt.msgPart)
			}
			if !strings.Contains(err.Error(), "offset") {
				t.Errorf("error %q does not name the offset", err)
			}
		})
	}
}

func TestParseLimits(t *testing.T) {
	deep := strings.Repeat("(!", MaxDepth+1) + "(a=1)" + strings.Repeat(")", MaxDepth+1)
	if _, err := Parse(deep); err == nil || !strings.Contains(err.Error(), "nesting") {
		t.Fatalf("deep nesting: err = %v", err)
	}
	ok := strings.Repeat("(!", MaxDepth-1) + "(a=1)" + strings.Repeat(")", MaxDepth-1)
	if _, err := Parse(ok); err != nil {
		t.Fatalf("nesting at the limit: %v", err)
	}
	long := "(a=" + strings.Repeat("x", MaxInputBytes) + ")"
	if _, err := Parse(long); err == nil {
		t.Fatal("over-long input accepted")
	}
}

// offer is a provider's properties as they arrive in JSON.
const offerJSON = `{
  "golem.inf.cpu.cores": 4,
  "golem.inf.cpu.threads": 8,
  "golem.inf.mem.gib": 7.5,
  "golem.inf.storage.gib": 80,
  "golem.inf.cpu.architecture": "x86_64",
  "golem.runtime.name": "vm",
  "golem.runtime.version@v": "0.3.1",
  "golem.runtime.capabilities": ["vpn", "inet", "manifest-support"],
  "golem.node.debug.subnet": "public",
  "golem.node.id.name": "provider-1.devnet",
  "golem.com.pricing.model.linear.coeffs": [0.001, 0.002, 0.0],
  "golem.srv.caps.multi-activity": true,
  "golem.com.expiration": "2026-11-22T10:00:00Z",
  "golem.com.amount@d": "0.50",
  "golem.nullish": null,
  "nested": {"inf": {"gpu": {"count": 2}}}
}`

func offerProps(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(offerJSON), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestEval(t *testing.T) {
	props := offerProps(t)
	tests := []struct {
		filter string
		want   Result
	}{
		// numbers
		{"(golem.inf.cpu.cores=4)", True},
		{"(golem.inf.cpu.cores=4.0)", True},
		{"(golem.inf.cpu.cores=5)", False},
		{"(golem.inf.cpu.cores>=4)", True},
		{"(golem.inf.cpu.cores>4)", False},
		{"(golem.inf.cpu.cores<=4)", True},
		{"(golem.inf.cpu.cores<10)", True}, // numeric, not lexical ("4" > "10")
		{"(golem.inf.cpu.cores<>4)", False},
		{"(golem.inf.cpu.cores<>3)", True},
		{"(golem.inf.mem.gib>=4)", True},
		{"(golem.inf.mem.gib>=7.5)", True},
		{"(golem.inf.mem.gib>7.5)", False},
		{"(golem.inf.mem.gib>=0.5)", True},
		{"(golem.inf.cpu.cores=four)", False}, // not a number: false, as yagna
		{"(golem.inf.cpu.cores>=abc)", False},
		// strings
		{"(golem.runtime.name=vm)", True},
		{"(golem.runtime.name=wasmtime)", False},
		{"(golem.runtime.name<>wasmtime)", True},
		{"(golem.runtime.name<>vm)", False},
		{"(golem.node.id.name=provider-1*)", True},
		{"(golem.node.id.name=*.devnet)", True},
		{"(golem.node.id.name=prov*devnet)", True},
		{"(golem.node.id.name=*)", True},
		{"(golem.node.id.name=*x*)", False},
		{"(golem.node.id.name=provider-2*)", False},
		{"(golem.node.id.name<>provider-2*)", True},
		{"(golem.node.id.name=provider-1.devne)", False},
		{"(golem.inf.cpu.architecture>=x86)", True},     // lexical
		{"(golem.inf.cpu.architecture<aarch64)", False}, // lexical
		{"(golem.node.debug.subnet=public)", True},
		// lists: membership
		{"(golem.runtime.capabilities=vpn)", True},
		{"(golem.runtime.capabilities=inet)", True},
		{"(golem.runtime.capabilities=gpu)", False},
		{"(golem.runtime.capabilities<>gpu)", True},
		{"(golem.runtime.capabilities<>vpn)", False},
		{"(golem.runtime.capabilities=manifest*)", True},
		{"(golem.runtime.capabilities>=vpn)", False}, // ordering meaningless on lists
		{"(golem.runtime.capabilities=[inet,vpn,manifest-support])", True},
		{"(golem.runtime.capabilities=[vpn,inet])", False},
		{"(golem.com.pricing.model.linear.coeffs=0.002)", True},
		{"(golem.com.pricing.model.linear.coeffs=0.5)", False},
		// bools
		{"(golem.srv.caps.multi-activity=true)", True},
		{"(golem.srv.caps.multi-activity=false)", False},
		{"(golem.srv.caps.multi-activity<>false)", True},
		{"(golem.srv.caps.multi-activity=yes)", False},
		// typed: versions, datetimes, decimals
		{"(golem.runtime.version@v>=0.2.0)", True},
		{"(golem.runtime.version@v>=0.10.0)", False}, // semver, not lexical
		{"(golem.runtime.version@v=0.3.1)", True},
		{"(golem.runtime.version@v<0.3.1)", False},
		{"(golem.runtime.version@v>0.3.1-rc.1)", True},
		{"(golem.runtime.version@v>=garbage)", False},
		{"(golem.com.expiration@t>2026-11-22T09:00:00Z)", True},
		{"(golem.com.expiration@t<2026-11-22T09:00:00+00:00)", False},
		{"(golem.com.amount@d=0.5)", True},
		{"(golem.com.amount@d<1)", True},
		// presence
		{"(golem.inf.cpu.cores=*)", True},
		{"(golem.missing=*)", False},
		{"(golem.nullish=*)", True},
		{"(!(golem.missing=*))", True},
		// absent properties are undefined, and stay so through the operators
		{"(golem.missing=1)", Undefined},
		{"(golem.nullish=1)", Undefined},
		{"(!(golem.missing=1))", Undefined},
		{"(&(golem.missing=1)(golem.runtime.name=vm))", Undefined},
		{"(&(golem.missing=1)(golem.runtime.name=wasm))", False},
		{"(|(golem.missing=1)(golem.runtime.name=vm))", True},
		{"(|(golem.missing=1)(golem.runtime.name=wasm))", Undefined},
		// nested JSON objects
		{"(nested.inf.gpu.count>=2)", True},
		{"(nested.inf.gpu=*)", True},
		{"(nested.inf=1)", Undefined},
		// groups
		{"()", True},
		{"(&)", True},
		{"(|)", False},
		{"(&(golem.inf.cpu.cores>=2)(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn))", True},
		{"(&(golem.inf.cpu.cores>=8)(golem.inf.mem.gib>=4))", False},
		{"(|(golem.inf.cpu.cores>=8)(golem.inf.mem.gib>=4))", True},
		{"(!(golem.node.debug.subnet=private))", True},
		{"(&(golem.runtime.name=vm)(!(golem.node.debug.subnet=private*))(|(golem.inf.cpu.threads>=16)(golem.inf.cpu.cores>=4)))", True},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			e, err := Parse(tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Eval(props); got != tt.want {
				t.Fatalf("Eval = %v, want %v", got, tt.want)
			}
			if got := e.Match(props); got != (tt.want == True) {
				t.Fatalf("Match = %v, want %v", got, tt.want == True)
			}
		})
	}
}

func TestEvalGoTypes(t *testing.T) {
	props := map[string]any{
		"i": 3, "i64": int64(3), "u8": uint8(3), "f32": float32(3), "num": json.Number("3"),
		"strs": []string{"a", "b"},
	}
	for _, k := range []string{"i", "i64", "u8", "f32", "num"} {
		if !mustParse("(" + k + "=3)").Match(props) {
			t.Errorf("%s=3 does not match", k)
		}
		if !mustParse("(" + k + "<3.5)").Match(props) {
			t.Errorf("%s<3.5 does not match", k)
		}
	}
	if !mustParse("(strs=b)").Match(props) {
		t.Error("[]string membership")
	}
	if mustParse("(x=1)").Match(nil) {
		t.Error("nil props matched")
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"*", "", true},
		{"a*", "a", true},
		{"a*", "abc", true},
		{"*c", "abc", true},
		{"*c", "abd", false},
		{"a*c", "abbbc", true},
		{"a*c*e", "abcde", true},
		{"a*c*e", "abcdf", false},
		{"a.c", "abc", false}, // '.' is literal
		{"**", "x", true},
		{"*a*a*a*a*b", strings.Repeat("a", 50), false},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func TestMatches(t *testing.T) {
	offer := offerProps(t)
	offerCons := "(&(golem.srv.comp.expiration>0)(golem.node.debug.subnet=public))"
	demand := map[string]any{
		"golem.srv.comp.expiration":   1763800000000,
		"golem.node.debug.subnet":     "public",
		"golem.srv.comp.task_package": "hash:sha3:abc:http://x/y.gvmi",
	}
	tests := []struct {
		name                string
		demandCons, offCons string
		demandP             map[string]any
		want                bool
		wantErr             bool
	}{
		{"both ways", "(&(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn))", offerCons, demand, true, false},
		{"demand side fails", "(golem.inf.mem.gib>=16)", offerCons, demand, false, false},
		{"offer side fails", "(golem.inf.mem.gib>=4)", offerCons, map[string]any{"golem.srv.comp.expiration": 1, "golem.node.debug.subnet": "private"}, false, false},
		{"offer side undefined", "(golem.inf.mem.gib>=4)", offerCons, map[string]any{}, false, false},
		{"empty constraints are true", "", " ", map[string]any{}, true, false},
		{"bad demand", "(a=1", offerCons, demand, false, true},
		{"bad offer", "()", "((", demand, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Matches(tt.demandP, tt.demandCons, offer, tt.offCons)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFromGAP16(t *testing.T) {
	tests := []struct {
		name       string
		cons, caps []string
		want       string
		wantErr    string
	}{
		{"none", nil, nil, "()", ""},
		{"conformance gap16/webapp", []string{"golem.inf.cpu.cores=2", "golem.inf.mem.gib>=4"}, []string{"vpn"},
			"(&(golem.inf.cpu.cores=2)(golem.inf.mem.gib>=4)(golem.runtime.capabilities=vpn))", ""},
		{"dapp-store capabilities", nil, []string{"inet", "manifest-support", "vpn"},
			"(&(golem.runtime.capabilities=inet)(golem.runtime.capabilities=manifest-support)(golem.runtime.capabilities=vpn))", ""},
		{"one", []string{"golem.inf.cpu.cores=2"}, nil, "(golem.inf.cpu.cores=2)", ""},
		{"two", []string{"golem.inf.cpu.cores=2", "golem.inf.mem.gib>=4"}, nil, "(&(golem.inf.cpu.cores=2)(golem.inf.mem.gib>=4))", ""},
		{"spaces", []string{" golem.inf.mem.gib >= 4 "}, nil, "(golem.inf.mem.gib>=4)", ""},
		{"already parenthesized", []string{"(golem.inf.mem.gib>=4)", "(|(a=1)(b=2))"}, nil, "(&(golem.inf.mem.gib>=4)(|(a=1)(b=2)))", ""},
		{"nested and flattened", []string{"(&(a=1)(b=2))", "c<3"}, nil, "(&(a=1)(b=2)(c<3))", ""},
		{"capabilities", nil, []string{"vpn"}, "(golem.runtime.capabilities=vpn)", ""},
		{"both", []string{"golem.inf.cpu.threads>=4"}, []string{"vpn", "inet"}, "(&(golem.inf.cpu.threads>=4)(golem.runtime.capabilities=vpn)(golem.runtime.capabilities=inet))", ""},
		{"presence", []string{"golem.node.id.name=*"}, nil, "(golem.node.id.name=*)", ""},
		{"empty constraint", []string{""}, nil, "", "constraint 0 is empty"},
		{"bad constraint", []string{"golem.inf.cpu.cores"}, nil, "", "expected an operator"},
		{"unbalanced", []string{"a=1)"}, nil, "", "trailing"},
		{"bad capability", nil, []string{"vpn)"}, "", "capability 0"},
		{"empty capability", nil, []string{" "}, "", "capability 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromGAP16(tt.cons, tt.caps)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("FromGAP16 = %q, want %q", got, tt.want)
			}
			if _, err := Parse(got); err != nil {
				t.Fatalf("result does not parse: %v", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"()", "(a=1)", "(&(a=1)(b>=2))", "(|(a=*)(!(b<>c)))", "(a=[x,y])", "(v@v>=1.2.3-rc.1)",
		"(t@t<2026-01-01T00:00:00Z)", "(d@d>0.1)", "(a~=1)", "(((", ")", "(&", "(n.x=a*b*c)",
	} {
		f.Add(s)
	}
	props := map[string]any{
		"a": 1.0, "b": "x", "n": map[string]any{"x": "abc"}, "v": "1.2.3", "t": "2025-01-01T00:00:00Z",
		"d": "0.5", "l": []any{"a", 1.0, true, nil}, "bo": true,
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(s) && len(s) <= MaxInputBytes {
				t.Fatalf("bad error for %q: %v", s, err)
			}
			return
		}
		_ = e.Eval(props)
		c := e.String()
		e2, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", c, s, err)
		}
		if e2.String() != c {
			t.Fatalf("canonical form not stable: %q -> %q", c, e2.String())
		}
		if e2.Eval(props) != e.Eval(props) {
			t.Fatalf("canonical form evaluates differently: %q", c)
		}
	})
}

// mustParse is Parse for filters known to be valid; it panics on error.
func mustParse(s string) Expr {
	e, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return e
}
