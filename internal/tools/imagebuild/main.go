// Command imagebuild builds one image from a Dockerfile and a context
// directory through the Docker Engine API, for `make images`: the docker
// CLI's legacy builder prints a deprecation warning per image, and the
// project talks to the Engine through its API, never the CLI.
//
//	imagebuild -f images/devnet.Dockerfile -t gcompose/devnet:dev bin
//
// Only the files the Dockerfile's COPY and ADD instructions name are sent,
// not the whole context directory (bin/ holds every binary).
package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/client"
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
	tarball, err := tarOf(dir, df, files)
	if err != nil {
		return err
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	resp, err := cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
	})
	if err != nil {
		return fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	return readBuildStream(resp.Body)
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

// tarOf is the build context: the Dockerfile and the files, with their
// modes, at a fixed time so that the same files give the same layers.
func tarOf(dir string, dockerfile []byte, files []string) (*bytes.Buffer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(dockerfile); err != nil {
		return nil, err
	}
	sort.Strings(files)
	for _, name := range files {
		if name == "Dockerfile" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: int64(len(data))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	return &b, tw.Close()
}

// readBuildStream drains the build's JSON messages; on an error it returns
// it with the build's output, which is otherwise not shown.
func readBuildStream(r io.Reader) error {
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
			return fmt.Errorf("%s\n%s", msg.Error, log.String())
		}
	}
}
