// Package dockerbuild builds an image through the Docker Engine API from a
// Dockerfile and files held in memory: the one build-context tar and the one
// reading of the build's output, for `make images`
// (internal/tools/imagebuild) and for tests (internal/testimage).
package dockerbuild

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
)

// File is one file of a build context besides the Dockerfile.
type File struct {
	Data []byte
	// Mode is the file's permission bits; 0 means 0o755 (most context files
	// are binaries).
	Mode int64
}

// Build sends the Dockerfile and files as the build context, with opts
// (Tags, Labels, ...; Dockerfile is set here), and waits for the build to
// end. A failed build's error carries the build's output, which is
// otherwise not shown.
func Build(ctx context.Context, cli *client.Client, dockerfile []byte, files map[string]File, opts build.ImageBuildOptions) error {
	tarball, err := Context(dockerfile, files)
	if err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	return BuildContext(ctx, cli, tarball, opts)
}

// BuildContext is Build from a context Context made: for a caller that
// reads the context too (internal/testimage hashes it to tag the image).
func BuildContext(ctx context.Context, cli *client.Client, tarball io.Reader, opts build.ImageBuildOptions) error {
	opts.Dockerfile = "Dockerfile"
	resp, err := cli.ImageBuild(ctx, tarball, opts)
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	return readOutput(resp.Body)
}

// Context is the tar of a build context: the Dockerfile (0644) and the
// files in name order, all at one fixed time, so that the same files give
// the same layers.
func Context(dockerfile []byte, files map[string]File) (*bytes.Buffer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	add := func(name string, data []byte, mode int64) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("Dockerfile", dockerfile, 0o644); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if name != "Dockerfile" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		f := files[name]
		mode := f.Mode
		if mode == 0 {
			mode = 0o755
		}
		if err := add(name, f.Data, mode); err != nil {
			return nil, err
		}
	}
	return &b, tw.Close()
}

// readOutput drains the build's JSON messages and returns the first error
// one reports, with what the build printed before it.
func readOutput(r io.Reader) error {
	dec := json.NewDecoder(r)
	var log strings.Builder
	for {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the build's output: %w", err)
		}
		log.WriteString(msg.Stream)
		if msg.Error != "" {
			return fmt.Errorf("image build: %s\n%s", msg.Error, log.String())
		}
	}
}
