// Package testimage makes tests that need Docker self-contained: it checks
// that the Engine is reachable and builds a Go main package of this module
// into a FROM scratch image through the Engine API (or one of the module's
// Dockerfiles with the binaries it copies), so `go test` needs neither
// `make images` nor the docker CLI; Binary builds a command to run as a
// process.
//
// Images are cached twice: within one test binary run (each package/tag is
// built once, whatever the number of tests asking), and across runs (the
// image carries the SHA-256 of its binary as a label; an existing image with
// the same binary is reused without a build).
package testimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/dockerbuild"
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

// engineKey tells engines apart in the build cache: a test may point
// DOCKER_HOST at another engine (t.Setenv), whose images are its own.
func engineKey() string { return os.Getenv("DOCKER_HOST") }

// Build compiles the Go main package pkg (a path relative to the module root,
// e.g. "./cmd/file-adapter", or an import path) with CGO_ENABLED=0 and builds
// a FROM scratch image tagged tag holding the binary at /<name> as its
// entrypoint, <name> being the package directory's base name. It returns the
// image ID. Failures fail the test.
func Build(t testing.TB, ctx context.Context, pkg, tag string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(engineKey()+"\x00"+pkg+"\x00"+tag, &buildOnce{})
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
	v, _ := builds.LoadOrStore(engineKey()+"\x00derive\x00"+dockerfile+"\x00"+tag, &buildOnce{})
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
	return buildTagged(ctx, cli, []byte(dockerfile), nil, tag, map[string]string{Label: "derived"})
}

// buildTagged builds an image tagged tag and returns its ID.
func buildTagged(ctx context.Context, cli *client.Client, dockerfile []byte, files map[string]dockerbuild.File, tag string, labels map[string]string) (string, error) {
	if err := dockerbuild.Build(ctx, cli, dockerfile, files, build.ImageBuildOptions{
		Tags: []string{tag}, Remove: true, ForceRemove: true, Labels: labels,
	}); err != nil {
		return "", err
	}
	ins, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("inspect built image %s: %w", tag, err)
	}
	return ins.ID, nil
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

	name := baseName(pkg)
	bin := filepath.Join(dir, name)
	if err := goBuild(ctx, root, pkg, bin, true); err != nil {
		return "", err
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
	id, err := buildTagged(ctx, cli, []byte(dockerfile), map[string]dockerbuild.File{name: {Data: binary}}, tag, map[string]string{Label: pkg, labelHash: hash})
	if err != nil {
		return "", err
	}
	pruneOld(ctx, cli, pkg)
	return id, nil
}

// goBuild compiles the Go main package pkg (relative to root, or an import
// path) to out: static for Linux (an image's binary), or for this machine.
func goBuild(ctx context.Context, root, pkg, out string, static bool) error {
	args := []string{"build", "-o", out}
	if static {
		args = []string{"build", "-trimpath", "-ldflags", "-s -w", "-o", out}
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// baseName is the name go build gives the binary of pkg.
func baseName(pkg string) string {
	return path.Base(filepath.ToSlash(strings.TrimSuffix(pkg, "/")))
}

// Binary compiles the Go main package pkg (relative to the module root, e.g.
// "./cmd/gcompose", or an import path) for this machine, once per test binary
// run, and returns the executable's path: for tests that run a command as a
// process. Failures fail the test.
func Binary(t testing.TB, ctx context.Context, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore("binary\x00"+pkg, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() {
		root, err := moduleRoot(ctx)
		if err != nil {
			b.err = err
			return
		}
		// Not t.TempDir: the binary outlives the test that asked first.
		dir, err := os.MkdirTemp("", "gcompose-testbin-")
		if err != nil {
			b.err = err
			return
		}
		b.id = filepath.Join(dir, baseName(pkg))
		b.err = goBuild(ctx, root, pkg, b.id, false)
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", pkg, b.err)
	}
	return b.id
}

// Dockerfile is an image to build from one of the module's Dockerfiles.
type Dockerfile struct {
	// Path is the Dockerfile, relative to the module root
	// ("images/devnet-db.Dockerfile").
	Path string
	// Mains are Go main packages built static into the context under their
	// base names ("./cmd/devnet-init" as devnet-init).
	Mains []string
	// Files are other context files: name in the context -> host path.
	Files map[string]string
	// Labels go on the image, besides Label=<Path>.
	Labels map[string]string
}

// BuildDockerfile builds d tagged tag through the Engine API, once per test
// binary run, and returns the image ID. Failures fail the test.
func BuildDockerfile(t testing.TB, ctx context.Context, d Dockerfile, tag string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(engineKey()+"\x00dockerfile\x00"+d.Path+"\x00"+tag, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() { b.id, b.err = buildDockerfile(ctx, d, tag) })
	if b.err != nil {
		t.Fatalf("build test image %s from %s: %v", tag, d.Path, b.err)
	}
	return b.id
}

func buildDockerfile(ctx context.Context, d Dockerfile, tag string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, d.Path))
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "gcompose-testimage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	files := map[string]dockerbuild.File{}
	for _, pkg := range d.Mains {
		bin := filepath.Join(dir, baseName(pkg))
		if err := goBuild(ctx, root, pkg, bin, true); err != nil {
			return "", err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return "", err
		}
		files[baseName(pkg)] = dockerbuild.File{Data: data}
	}
	for name, p := range d.Files {
		data, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("context file %s: %w", name, err)
		}
		files[name] = dockerbuild.File{Data: data}
	}
	labels := map[string]string{Label: d.Path}
	for k, v := range d.Labels {
		labels[k] = v
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	return buildTagged(ctx, cli, dockerfile, files, tag, labels)
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
