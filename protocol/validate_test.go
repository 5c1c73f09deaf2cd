package protocol_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/protocol"
)

func newValidator(t testing.TB) *protocol.Validator {
	t.Helper()
	v, err := protocol.NewValidator()
	if err != nil {
		t.Fatalf("NewValidator: %v", err)
	}
	return v
}

// TestMessages validates every testdata/<message>/*.json against the schema of
// <message>: ok-* must pass, bad-* must fail with the error in <case>.golden.
func TestMessages(t *testing.T) {
	v := newValidator(t)
	for _, msg := range []string{protocol.MsgRequest, protocol.MsgInitResult, protocol.MsgStateResult,
		protocol.MsgServeRequest, protocol.MsgServeResponse, protocol.MsgSweepResult, protocol.MsgCheckResult} {
		files, err := filepath.Glob(filepath.Join("testdata", msg, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no cases for %s: %v", msg, err)
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".json")
			t.Run(msg+"/"+name, func(t *testing.T) {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				var verr error
				switch msg {
				case protocol.MsgInitResult:
					verr = v.ValidateInitResult(data)
				case protocol.MsgStateResult:
					verr = v.ValidateStateResult(data)
				case protocol.MsgRequest:
					verr = v.ValidateRequest(data)
				case protocol.MsgSweepResult:
					verr = v.ValidateSweepResult(data)
				default:
					verr = v.ValidateMessage(msg, data)
				}
				if strings.HasPrefix(name, "ok-") {
					if verr != nil {
						t.Fatalf("want valid, got %v", verr)
					}
					return
				}
				if verr == nil {
					t.Fatal("want an error, got none")
				}
				golden.CheckString(t, strings.TrimSuffix(f, ".json")+".golden", verr.Error()+"\n")
			})
		}
	}
}

func TestSchemaErrorNamesPointerAndKeyword(t *testing.T) {
	v := newValidator(t)
	err := v.ValidateStateResult([]byte(`{"status":"STALE","actions":[{"description":"x"}]}`))
	var se *protocol.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("want *SchemaError, got %T %v", err, err)
	}
	want := protocol.Violation{Pointer: "/actions/0", Keyword: "required", Message: `missing property "name"`}
	if len(se.Violations) != 1 || se.Violations[0] != want {
		t.Fatalf("violations = %+v, want [%+v]", se.Violations, want)
	}
	if !strings.Contains(err.Error(), `/actions/0: missing property "name"`) {
		t.Errorf("message %q lacks the pointer and the words", err)
	}
}

func TestValidateConfig(t *testing.T) {
	v := newValidator(t)
	schema := json.RawMessage(`{"type":"object","additionalProperties":false,"required":["path"],
		"properties":{"path":{"type":"string","pattern":"^[^/]"},"mode":{"type":"string"},"n":{"type":"integer"}}}`)
	tests := []struct {
		name    string
		schema  json.RawMessage
		config  any
		wantErr string
	}{
		{"ok", schema, map[string]any{"path": "a.txt", "n": 3}, ""},
		{"ok struct", schema, struct {
			Path string `json:"path"`
		}{"a"}, ""},
		{"missing", schema, map[string]any{}, `config does not match its schema: (root): missing property "path"`},
		{"nil config is empty", schema, nil, `(root): missing property "path"`},
		{"type", schema, map[string]any{"path": 1}, "/path: got number, want string"},
		{"pattern", schema, map[string]any{"path": "/abs"}, "/path: "},
		{"integer", schema, map[string]any{"path": "a", "n": 1.5}, "/n: got number, want integer"},
		{"extra", schema, map[string]any{"path": "a", "x": 1}, `(root): property "x" not allowed`},
		{"no schema: any object", nil, map[string]any{"x": 1}, ""},
		{"no schema: not an object", nil, []int{1}, "want object"},
		{"broken schema", json.RawMessage(`{"type":"nope"}`), map[string]any{}, "adapter's config_schema"},
		{"remote ref refused", json.RawMessage(`{"$ref":"https://example.com/s.json"}`), map[string]any{}, "self-contained"},
		{"draft-07 schema", json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["a"]}`),
			map[string]any{}, `missing property "a"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.ValidateConfig(tt.schema, tt.config)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidatorConcurrent(t *testing.T) {
	v := newValidator(t)
	schema := json.RawMessage(`{"type":"object","required":["a"]}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := v.ValidateConfig(schema, map[string]any{"a": i}); err != nil {
				t.Error(err)
			}
			if err := v.ValidateStateResult([]byte(`{"status":"VALID","state":{}}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

func TestStateResultMarshal(t *testing.T) {
	v := newValidator(t)
	tests := []struct {
		name string
		in   protocol.StateResult
		want string
	}{
		{"valid nil state", protocol.StateResult{Status: protocol.Valid}, `{"status":"VALID","state":{}}`},
		{"valid state", protocol.StateResult{Status: protocol.Valid, State: map[string]any{"a": 1}}, `{"status":"VALID","state":{"a":1}}`},
		{"stale drops state", protocol.StateResult{Status: protocol.Stale, State: map[string]any{"a": 1},
			Actions: []protocol.ActionSpec{{Name: "x"}}, Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate}},
			`{"status":"STALE","actions":[{"name":"x"}],"gcompose":{"change":"create"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
			if err := v.ValidateStateResult(got); err != nil {
				t.Fatal(err)
			}
			var back protocol.StateResult
			if err := json.Unmarshal(got, &back); err != nil || back.Status != tt.in.Status {
				t.Fatalf("round trip: %v %+v", err, back)
			}
		})
	}
}

func TestCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		v       int
		wantErr string
	}{{0, ""}, {protocol.Version, ""}, {protocol.Version + 1, "upgrade gcompose"}, {-1, "upgrade the adapter"}} {
		err := protocol.CheckVersion(tt.v)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("CheckVersion(%d) = %v, want %q", tt.v, err, tt.wantErr)
		}
	}
}
