// Command misbehave-adapter is the entrypoint of the
// gcompose/misbehave-adapter image: an adapter that breaks the protocol on
// demand (package adapters/misbehave documents the modes).
package main

import "github.com/gcompose/gcompose/adapters/misbehave"

func main() {
	misbehave.Main()
}
