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
