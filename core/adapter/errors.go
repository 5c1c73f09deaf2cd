package adapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/protocol"
)

// errNotJSON marks an answer that is not one JSON value.
var errNotJSON = errors.New("answer is not JSON")

// checkJSON refuses empty and non-JSON answers before schema validation, so
// the error says so plainly.
func checkJSON(raw []byte) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return fmt.Errorf("%w: stdout was empty", errNotJSON)
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(trimmed))
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("%w: %v", errNotJSON, err)
	}
	if d.More() {
		return fmt.Errorf("%w: more than one JSON value on stdout", errNotJSON)
	}
	if _, ok := v.(map[string]any); !ok {
		return &protocol.SchemaError{Subject: "answer", Violations: []protocol.Violation{{Keyword: "type", Message: "want an object"}}}
	}
	return nil
}

// AnswerError is an adapter answer that is not JSON or breaks its schema.
type AnswerError struct {
	Resource string
	Call     string
	Image    string
	// Violations, when the answer is JSON of the wrong shape.
	Violations []protocol.Violation
	// Stdout is the start of the answer, when it is not JSON.
	Stdout     []byte
	StderrTail string
	Err        error
}

func (e *AnswerError) Error() string { return e.Resource + ": " + e.Reason() }

// ResourceAddress is the resource whose adapter answered.
func (e *AnswerError) ResourceAddress() string { return e.Resource }

// Reason is the error without the resource's address.
func (e *AnswerError) Reason() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s call: ", e.Call)
	switch {
	case len(e.Violations) > 0:
		for i, v := range e.Violations {
			if i == 0 {
				sb.WriteString("answer invalid at ")
			} else {
				sb.WriteString("; at ")
			}
			p := v.Pointer
			if p == "" {
				p = "(root)"
			}
			sb.WriteString(p)
			sb.WriteString(": ")
			sb.WriteString(v.Message)
		}
	case errors.Is(e.Err, errNotJSON):
		sb.WriteString(e.Err.Error())
		if len(bytes.TrimSpace(e.Stdout)) > 0 {
			fmt.Fprintf(&sb, "; stdout began %s", snippet(e.Stdout, 120))
		}
	default:
		fmt.Fprintf(&sb, "answer invalid: %v", e.Err)
	}
	fmt.Fprintf(&sb, " (adapter %s); %s", e.Image, runner.FormatTail(e.StderrTail))
	return sb.String()
}

func (e *AnswerError) Unwrap() error { return e.Err }

func (c *Client) answerError(resource, call, image string, res *runner.Result, err error) error {
	e := &AnswerError{Resource: resource, Call: call, Image: image, StderrTail: res.StderrTail, Err: err}
	var se *protocol.SchemaError
	if errors.As(err, &se) {
		e.Violations = se.Violations
	}
	if errors.Is(err, errNotJSON) {
		e.Stdout = res.Stdout
	}
	return e
}

func snippet(b []byte, max int) string {
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return fmt.Sprintf("%q...", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

// ConfigError is a resource config that breaks its adapter's config_schema.
type ConfigError struct {
	Resource   string
	Image      string
	Violations []protocol.Violation
	Err        error
}

func (e *ConfigError) Error() string { return e.Resource + ": " + e.Reason() }

// ResourceAddress is the resource whose config is refused.
func (e *ConfigError) ResourceAddress() string { return e.Resource }

// Reason is the error without the resource's address.
func (e *ConfigError) Reason() string {
	if len(e.Violations) == 0 {
		return fmt.Sprintf("config: %v", e.Err)
	}
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		p := v.Pointer
		if p == "" {
			p = "(root)"
		}
		parts[i] = p + ": " + v.Message
	}
	return fmt.Sprintf("config invalid at %s (checked before the state call against the config_schema of adapter %s)",
		strings.Join(parts, "; at "), e.Image)
}

func (e *ConfigError) Unwrap() error { return e.Err }

func configError(t Target, err error) error {
	e := &ConfigError{Resource: t.Name, Image: t.Image, Err: err}
	var se *protocol.SchemaError
	if errors.As(err, &se) {
		e.Violations = se.Violations
	}
	return e
}
