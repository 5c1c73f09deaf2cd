package protocol_test

import (
	"testing"

	"github.com/gcompose/gcompose/protocol"
)

// BenchmarkNewValidator is what every one-shot SDK container pays once.
func BenchmarkNewValidator(b *testing.B) {
	for b.Loop() {
		if _, err := protocol.NewValidator(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateStateResult is what gcompose pays per state answer.
func BenchmarkValidateStateResult(b *testing.B) {
	v := newValidator(b)
	answer := []byte(`{"status":"STALE","staleState":{"a":1},"actions":[{"name":"create","args":["action","create"]}],"gcompose":{"change":"create","reason":"missing"}}`)
	for b.Loop() {
		if err := v.ValidateStateResult(answer); err != nil {
			b.Fatal(err)
		}
	}
}
