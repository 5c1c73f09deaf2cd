// Command file-adapter is the entrypoint of the gcompose/file-adapter image:
// the adapter of package adapters/file, managing files in the "files" plug
// mounted at /files.
package main

import (
	"os"

	"github.com/gcompose/gcompose/adapters/file"
	"github.com/gcompose/gcompose/protocol/sdk"
)

func main() {
	sdk.Main(file.NewWith(file.ContainerPath, file.Options{Sweep: os.Getenv(file.EnvSweep) == "1"}))
}
