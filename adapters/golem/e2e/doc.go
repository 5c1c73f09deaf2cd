// Package e2e holds the end-to-end tests of the Golem adapters: the gcompose
// CLI deploys examples/webapp (and plans every conformance descriptor)
// against an in-process devnet on loopback, with adapter and provider images
// built from this tree through the Engine API.
package e2e
