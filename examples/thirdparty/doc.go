// Package thirdparty holds adapters written as a third party would: from
// docs/protocol.md and the Deployster contract alone, with the Go standard
// library only (no import from this module), each a main package with its
// own FROM scratch Dockerfile:
//
//   - kv-deployster: a plain Deployster adapter (no gcompose extension);
//   - counter: an adapter that opts in to gcompose protocol 1.
//
// thirdparty_test.go builds both images and drives them with the gcompose
// binary, end to end.
package thirdparty
