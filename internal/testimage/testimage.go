// Package testimage makes tests that need Docker self-contained: it checks
// that the Engine is reachable and builds a Go main package of this module
// into a FROM scratch image through the Engine API, so `go test` needs
// neither `make images` nor the docker CLI.
//
// Images are cached twice: within one test binary run (each package/tag is
// built once, whatever the number of tests asking), and across runs (the
// image carries the SHA-256 of its binary as a label; an existing image with
// the same binary is reused without a build).
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Label is carried by every image and container tests create.
const Label = "gcompose.test"

// labelHash carries the SHA-256 of the image's binary.
const labelHash = "gcompose.test.binary-sha256"

// Client returns an Engine client from the environment with API version
// negotiation, closed when the test ends.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker engine client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// RequireDocker skips the test when the Docker Engine is unreachable, or
// fails it when the CI environment variable is set (CI must run every test).
func RequireDocker(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ping(ctx)
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("Docker Engine unreachable and CI is set: %v", err)
	}
	t.Skipf("Docker Engine unreachable: %v", err)
}

func ping(ctx context.Context) error {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer cli.Close()
	_, err = cli.Ping(ctx)
	return err
}

// builds memoizes images per test binary run: a cache of immutable results
// (an image ID per package and tag), the one package-level state this
// test helper needs to build each image once however many tests ask.
var builds sync.Map // key string -> *buildOnce

type buildOnce struct {
	once sync.Once
	id   string
	err  error
}

// Build compiles the Go main package pkg (a path relative to the module root,
// e.g. "./cmd/file-adapter", or an import path) with CGO_ENABLED=0 and builds
// a FROM scratch image tagged tag holding the binary at /<name> as its
// entrypoint, <name> being the package directory's base name. It returns the
// image ID. Failures fail the test.
func Build(t testing.TB, ctx context.Context, pkg, tag string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg+"\x00"+tag, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() { b.id, b.err = buildImage(ctx, pkg, tag) })
	if b.err != nil {
		t.Fatalf("build test image %s from %s: %v", tag, pkg, b.err)
	}
	return b.id
}

// Derive builds an image tagged tag from a Dockerfile given as text, whose
// FROM names a local image (usually one made by Build), e.g. to bake an
// environment variable into an adapter image:
//
//	testimage.Derive(t, ctx, "FROM gcompose/misbehave-adapter:test\nENV MODE=hang\n", "gcompose/misbehave-adapter:init-hang")
//
// The build context is empty (no COPY). It returns the image ID; results
// are cached per test binary run like Build's.
func Derive(t testing.TB, ctx context.Context, dockerfile, tag string) string {
	t.Helper()
	v, _ := builds.LoadOrStore("derive\x00"+dockerfile+"\x00"+tag, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() { b.id, b.err = deriveImage(ctx, dockerfile, tag) })
	if b.err != nil {
		t.Fatalf("build test image %s: %v", tag, b.err)
	}
	return b.id
}

func deriveImage(ctx context.Context, dockerfile, tag string) (string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	tarball, err := tarOf(map[string][]byte{"Dockerfile": []byte(dockerfile)})
	if err != nil {
		return "", err
	}
	resp, err := cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{
		Tags: []string{tag}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Labels: map[string]string{Label: "derived"},
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	if err := readBuildStream(resp.Body); err != nil {
		return "", err
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("inspect built image %s: %w", tag, err)
	}
	return ins.ID, nil
}

// tarOf makes an in-memory build context (Dockerfile 0644, others 0755).
func tarOf(files map[string][]byte) (*bytes.Buffer, error) {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		mode := int64(0o755)
		if name == "Dockerfile" {
			mode = 0o644
		}
		data := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &tarball, nil
}

func buildImage(ctx context.Context, pkg, tag string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gcompose-testimage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	name := path.Base(filepath.ToSlash(strings.TrimSuffix(pkg, "/")))
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(binary)
	hash := hex.EncodeToString(sum[:])

	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()

	// Reuse the image of an earlier run when it holds the same binary.
	if ins, err := cli.ImageInspect(ctx, tag); err == nil && ins.Config != nil && ins.Config.Labels[labelHash] == hash {
		return ins.ID, nil
	}

	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nENTRYPOINT [\"/%s\"]\n", name, name, name)
	tarball, err := tarOf(map[string][]byte{"Dockerfile": []byte(dockerfile), name: binary})
	if err != nil {
		return "", err
	}

	resp, err := cli.ImageBuild(ctx, tarball, build.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  "Dockerfile",
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{Label: pkg, labelHash: hash},
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	if err := readBuildStream(resp.Body); err != nil {
		return "", err
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("inspect built image %s: %w", tag, err)
	}
	pruneOld(ctx, cli, pkg)
	return ins.ID, nil
}

// pruneAge: untagged test images older than this are removed. Younger ones
// may still be in use by another test binary that built the same tag at the
// same time.
const pruneAge = 15 * time.Minute

// pruneOld removes untagged images an earlier build of pkg left behind, so
// that rebuilding test images does not fill the disk. Failures are ignored
// (an image in use stays).
func pruneOld(ctx context.Context, cli *client.Client, pkg string) {
	list, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", Label+"="+pkg), filters.Arg("dangling", "true"))})
	if err != nil {
		return
	}
	for _, img := range list {
		if time.Since(time.Unix(img.Created, 0)) > pruneAge {
			_, _ = cli.ImageRemove(ctx, img.ID, image.RemoveOptions{PruneChildren: true})
		}
	}
}

// readBuildStream drains the build's JSON message stream and returns the
// first error it reports.
func readBuildStream(r io.Reader) error {
	dec := json.NewDecoder(r)
	var log strings.Builder
	for {
		var msg struct {
			Stream      string `json:"stream"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read image build output: %w", err)
		}
		log.WriteString(msg.Stream)
		if msg.Error != "" {
			return fmt.Errorf("image build: %s\n%s", msg.Error, log.String())
		}
	}
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// ContainersLabelled lists the IDs of all containers (running or not) that
// carry the label key=value; tests use it to prove nothing was left behind.
func ContainersLabelled(t testing.TB, ctx context.Context, key, value string) []string {
	t.Helper()
	return containersLabelled(t, ctx, key+"="+value)
}

func containersLabelled(t testing.TB, ctx context.Context, label string) []string {
	t.Helper()
	cli := Client(t)
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", label))})
	if err != nil {
		t.Fatalf("list containers labelled %s: %v", label, err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

// Labels returns the label every container of this test must carry
// (gcompose.test=<test name>) and registers a cleanup that force-removes
// whatever containers with it are left when the test ends.
func Labels(t testing.TB) map[string]string {
	t.Helper()
	value := t.Name()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return
		}
		defer cli.Close()
		list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", Label+"="+value))})
		if err != nil {
			return
		}
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	})
	return map[string]string{Label: value}
}
