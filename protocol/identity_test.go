package protocol_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/protocol"
)

func TestParseIdentityLines(t *testing.T) {
	p := protocol.IdentityPrefix
	tests := []struct {
		name     string
		stdout   string
		text     string
		identity map[string]any
		wantErr  string
	}{
		{"empty", "", "", nil, ""},
		{"text only", "hello\nworld\n", "hello\nworld\n", nil, ""},
		{"no final newline", "hello", "hello", nil, ""},
		{"one identity", "creating\n" + p + `{"id":"a1"}` + "\ndone\n", "creating\ndone\n", map[string]any{"id": "a1"}, ""},
		{"merged, later wins", p + `{"id":"a","n":1}` + "\n" + p + `{"n":2}` + "\n", "", map[string]any{"id": "a", "n": 2.0}, ""},
		{"malformed", "x\n" + p + "{not json\ny\n", "x\ny\n", nil, "stdout line 2: identity"},
		{"not an object", p + "[1]\n", "", nil, "identity"},
		{"prefix must start the line", " " + p + `{"id":1}` + "\n", " " + p + `{"id":1}` + "\n", nil, ""},
		{"long line", strings.Repeat("x", 200000) + "\n", strings.Repeat("x", 200000) + "\n", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, id, err := protocol.ParseIdentityLines([]byte(tt.stdout))
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			if tt.identity != nil || id != nil {
				if tt.identity["n"] == nil && id != nil && id["n"] != nil {
					t.Errorf("identity = %v, want %v", id, tt.identity)
				}
				if !reflect.DeepEqual(id, tt.identity) {
					t.Errorf("identity = %#v, want %#v", id, tt.identity)
				}
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestIdentityLineRoundTrip(t *testing.T) {
	line, err := protocol.IdentityLine(map[string]any{"agreement": "0xab"})
	if err != nil {
		t.Fatal(err)
	}
	_, id, err := protocol.ParseIdentityLines([]byte("before\n" + line))
	if err != nil || id["agreement"] != "0xab" {
		t.Fatalf("round trip: %v %v", id, err)
	}
}

func TestParseActionOutput(t *testing.T) {
	id, st := protocol.IdentityPrefix, protocol.StatePrefix
	valid := `{"status":"VALID","state":{"path":"a"}}`
	tests := []struct {
		name     string
		stdout   string
		text     string
		identity map[string]any
		state    string
		wantErr  string
	}{
		{"no state", "wrote a\n", "wrote a\n", nil, "", ""},
		{"state last", "wrote a\n" + id + `{"path":"a"}` + "\n" + st + valid + "\n", "wrote a\n", map[string]any{"path": "a"}, valid, ""},
		{"state without final newline", st + valid, "", nil, valid, ""},
		{"state before text", st + valid + "\ndone\n", "done\n", nil, valid, ""},
		{"two state lines", st + valid + "\n" + st + valid + "\n", "", nil, valid, "stdout line 2: a second state line"},
		{"not JSON", "x\n" + st + "{oops\n", "x\n", nil, "", "stdout line 2: state: want a JSON object"},
		{"not an object", st + "[1]\n", "", nil, "", "state: want a JSON object"},
		{"null", st + "null\n", "", nil, "", "state: want a JSON object"},
		{"prefix must start the line", " " + st + valid + "\n", " " + st + valid + "\n", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := protocol.ParseActionOutput([]byte(tt.stdout))
			if out.Text != tt.text {
				t.Errorf("text = %q, want %q", out.Text, tt.text)
			}
			if !reflect.DeepEqual(out.Identity, tt.identity) {
				t.Errorf("identity = %#v, want %#v", out.Identity, tt.identity)
			}
			if string(out.State) != tt.state {
				t.Errorf("state = %s, want %s", out.State, tt.state)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// Without state lines in mind, a state line is text (a plain
	// Deployster engine shows it, too).
	text, _, err := protocol.ParseIdentityLines([]byte(st + valid + "\n"))
	if err != nil || text != st+valid+"\n" {
		t.Errorf("ParseIdentityLines: %q %v; want the state line as text", text, err)
	}
}

func TestStateLineRoundTrip(t *testing.T) {
	line, err := protocol.StateLine(protocol.StateResult{Status: protocol.Valid})
	if err != nil {
		t.Fatal(err)
	}
	out, err := protocol.ParseActionOutput([]byte("done\n" + line))
	if err != nil || string(out.State) != `{"status":"VALID","state":{}}` || out.Text != "done\n" {
		t.Fatalf("round trip: %+v %v", out, err)
	}
}
