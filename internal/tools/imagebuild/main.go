// Command imagebuild builds one image from a Dockerfile and a context
// directory through the Docker Engine API, for `make images`: the docker
// CLI's legacy builder prints a deprecation warning per image, and the
// project talks to the Engine through its API, never the CLI.
//
//	imagebuild -f images/devnet.Dockerfile -t gcompose/devnet:dev bin
//
// It builds on whichever engine DOCKER_HOST names: Docker, or Podman's
// Docker-compatible API (docs/engines.md).
//
// Only the files the Dockerfile's COPY and ADD instructions name are sent,
// not the whole context directory (bin/ holds every binary).
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/dockerbuild"
)

func main() {
	dockerfile := flag.String("f", "", "the Dockerfile")
	tag := flag.String("t", "", "the image tag")
	flag.Parse()
	if *dockerfile == "" || *tag == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: imagebuild -f DOCKERFILE -t TAG CONTEXT_DIR")
		os.Exit(64)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *dockerfile, *tag, flag.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "imagebuild %s: %v\n", *tag, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dockerfile, tag, dir string) error {
	df, err := os.ReadFile(dockerfile)
	if err != nil {
		return err
	}
	files, err := contextFiles(df, dir)
	if err != nil {
		return err
	}
	sent, err := readFiles(dir, files)
	if err != nil {
		return err
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	err = dockerbuild.Build(ctx, cli, df, sent, build.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if client.IsErrConnectionFailed(err) && os.Getenv(client.EnvOverrideHost) == "" {
		// make images builds on whichever engine DOCKER_HOST names.
		return fmt.Errorf("%w (with Podman, set DOCKER_HOST to its socket: docs/engines.md)", err)
	}
	return err
}

// contextFiles are the context files the Dockerfile copies, relative to
// dir; every file of dir when it copies something this reading does not
// follow (a wildcard, a directory, --from, a heredoc).
func contextFiles(dockerfile []byte, dir string) ([]string, error) {
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || !strings.EqualFold(fields[0], "COPY") && !strings.EqualFold(fields[0], "ADD") {
			continue
		}
		for _, src := range fields[1 : len(fields)-1] {
			fi, err := os.Stat(filepath.Join(dir, src))
			if strings.HasPrefix(src, "-") || strings.HasPrefix(src, "[") || strings.HasPrefix(src, "<<") ||
				strings.ContainsAny(src, "*?") || err != nil || !fi.Mode().IsRegular() {
				return allFiles(dir)
			}
			files = append(files, path.Clean(src))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return files, nil
}

func allFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	return files, err
}

// readFiles reads the context files, relative to dir, with their modes.
func readFiles(dir string, names []string) (map[string]dockerbuild.File, error) {
	files := make(map[string]dockerbuild.File, len(names))
	for _, name := range names {
		p := filepath.Join(dir, filepath.FromSlash(name))
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		files[name] = dockerbuild.File{Data: data, Mode: int64(fi.Mode().Perm())}
	}
	return files, nil
}
