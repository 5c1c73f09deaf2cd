// Package testimage makes tests that need Docker self-contained: it checks
// that the Engine is reachable and builds a Go main package of this module
// into a FROM scratch image through the Engine API (or one of the module's
// Dockerfiles with the binaries it copies), so `go test` needs neither
// `make images` nor the docker CLI; Binary builds a command to run as a
// process.
//
// An image's tag carries the SHA-256 of what it is built from (the build
// context, its labels and the images it is built FROM): Image(t, ctx, pkg,
// "gcompose-test/file-adapter:e2e") returns
// "gcompose-test/file-adapter:e2e-<16 hex>", and tests use that reference.
// The name alone is shared by every checkout on the Engine: two runs from
// trees with different code each get their own image, however they
// interleave, while the same code is built once and shared (the same tag,
// the same image). twotrees.sh shows it with two clones running the golem
// e2e at once, one with an adapter whose init answer gcompose refuses. Images are cached within one test binary run (each is
// built once, whatever the number of tests asking) and across runs (an
// existing image of the same content is reused).
//
// Nothing a test run might still use is removed: after building, the images
// of the same name that no run has used for imagegc.StaleAfter go (each use
// tags an image again, which dates its last use); `make clean-test-images`
// removes the rest (internal/testimage/cleanimages).
package testimage

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/dockerbuild"
	"github.com/gcompose/gcompose/internal/testimage/imagegc"
)

// Label is carried by every image and container tests create.
const Label = imagegc.LabelTest

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
// (an image reference per package and name), the one package-level state
// this test helper needs to build each image once however many tests ask.
var builds sync.Map // key string -> *buildOnce

type buildOnce struct {
	once sync.Once
	ref  string
	err  error
}

// engineKey tells engines apart in the build cache: a test may point
// DOCKER_HOST at another engine (t.Setenv), whose images are its own.
func engineKey() string { return os.Getenv("DOCKER_HOST") }

// once runs build once per key and test binary run, and fails the test with
// what on error.
func once(t testing.TB, key, what string, build func() (string, error)) string {
	t.Helper()
	v, _ := builds.LoadOrStore(engineKey()+"\x00"+key, &buildOnce{})
	b := v.(*buildOnce)
	b.once.Do(func() { b.ref, b.err = build() })
	if b.err != nil {
		t.Fatalf("%s: %v", what, b.err)
	}
	return b.ref
}

// Image compiles the Go main package pkg (a path relative to the module
// root, e.g. "./cmd/file-adapter", or an import path) with CGO_ENABLED=0
// into a FROM scratch image holding the binary at /<base> as its
// entrypoint, <base> being the package directory's base name, and returns
// the image's reference: name ("gcompose-test/file-adapter:e2e") with the
// content's hash added to its tag. Use that reference, never name: see the
// package comment. Failures fail the test.
func Image(t testing.TB, ctx context.Context, pkg, name string) string {
	t.Helper()
	return once(t, "go\x00"+pkg+"\x00"+name, "build test image "+name+" from "+pkg, func() (string, error) {
		return goImage(ctx, pkg, name)
	})
}

// DerivedImage builds an image named name from a Dockerfile given as text,
// whose FROM names a local image (usually a reference Image returned), e.g.
// to bake an environment variable into an adapter image:
//
//	base := testimage.Image(t, ctx, "./cmd/misbehave-adapter", "gcompose-test/misbehave-adapter:e2e")
//	testimage.DerivedImage(t, ctx, "FROM "+base+"\nENV MODE=hang\n", "gcompose-test/misbehave-adapter:init-hang")
//
// The build context is empty (no COPY). It returns the image's reference,
// whose hash covers the Dockerfile and the ID of each image it is built
// FROM; results are cached like Image's.
func DerivedImage(t testing.TB, ctx context.Context, dockerfile, name string) string {
	t.Helper()
	return once(t, "derive\x00"+dockerfile+"\x00"+name, "build test image "+name, func() (string, error) {
		return ensure(ctx, name, []byte(dockerfile), nil, map[string]string{Label: "derived"})
	})
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

// DockerfileImage builds d as an image named name through the Engine API,
// once per test binary run, and returns the image's reference (name with
// the content's hash added to its tag, like Image's). Failures fail the
// test.
func DockerfileImage(t testing.TB, ctx context.Context, d Dockerfile, name string) string {
	t.Helper()
	return once(t, "dockerfile\x00"+d.Path+"\x00"+name, "build test image "+name+" from "+d.Path, func() (string, error) {
		return dockerfileImage(ctx, d, name)
	})
}

func goImage(ctx context.Context, pkg, name string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	binary, err := staticBinary(ctx, root, pkg)
	if err != nil {
		return "", err
	}
	base := baseName(pkg)
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %s /%s\nENTRYPOINT [\"/%s\"]\n", base, base, base)
	return ensure(ctx, name, []byte(dockerfile), map[string]dockerbuild.File{base: {Data: binary}}, map[string]string{Label: pkg})
}

func dockerfileImage(ctx context.Context, d Dockerfile, name string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, d.Path))
	if err != nil {
		return "", err
	}
	files := map[string]dockerbuild.File{}
	for _, pkg := range d.Mains {
		data, err := staticBinary(ctx, root, pkg)
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
	return ensure(ctx, name, dockerfile, files, labels)
}

// staticBinary compiles pkg static for Linux and returns the executable.
func staticBinary(ctx context.Context, root, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "gcompose-testimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, baseName(pkg))
	if err := goBuild(ctx, root, pkg, bin, true); err != nil {
		return nil, err
	}
	return os.ReadFile(bin)
}

// ensure returns the reference of the image of this content named name,
// building it unless the Engine has it already.
func ensure(ctx context.Context, name string, dockerfile []byte, files map[string]dockerbuild.File, labels map[string]string) (string, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return "", fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	tarball, err := dockerbuild.Context(dockerfile, files)
	if err != nil {
		return "", fmt.Errorf("build context: %w", err)
	}
	bases, err := baseImages(ctx, cli, dockerfile)
	if err != nil {
		return "", err
	}
	sum := contentHash(tarball.Bytes(), labels, bases)
	ref, err := contentRef(name, sum)
	if err != nil {
		return "", err
	}
	if ins, err := cli.ImageInspect(ctx, ref); err == nil && ins.Config != nil && ins.Config.Labels[imagegc.LabelContent] == sum {
		// Tagged again, so that its tag time says it is in use (imagegc).
		// Removed meanwhile (unused for imagegc.StaleAfter), it is built.
		err := cli.ImageTag(ctx, ins.ID, ref)
		if err == nil {
			return ref, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("tag %s again: %w", ref, err)
		}
	}
	all := map[string]string{imagegc.LabelName: name, imagegc.LabelContent: sum}
	for k, v := range labels {
		all[k] = v
	}
	if err := dockerbuild.BuildContext(ctx, cli, tarball, build.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true, Labels: all,
	}); err != nil {
		return "", err
	}
	ins, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		return "", fmt.Errorf("inspect built image %s: %w", ref, err)
	}
	// Best effort: what stays is removed by a later build or by make
	// clean-test-images.
	_, _ = imagegc.Collect(ctx, cli, imagegc.Options{UnusedFor: imagegc.StaleAfter, Name: name, Keep: ins.ID, RequireUseTime: true})
	return ref, nil
}

// contentHash is the hex SHA-256 of a build context, the image's labels
// and the IDs of the images it is built FROM.
func contentHash(tarball []byte, labels map[string]string, bases []string) string {
	h := sha256.New()
	fmt.Fprintf(h, "context %d\n", len(tarball))
	h.Write(tarball)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "label %q=%q\n", k, labels[k])
	}
	for _, b := range bases {
		fmt.Fprintf(h, "from %s\n", b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// contentTagLen is how many hex digits of the content hash the tag carries.
const contentTagLen = 16

// contentRef adds the first hex digits of sum to name's tag
// ("repo:tag" -> "repo:tag-<hex>", "repo" -> "repo:<hex>").
func contentRef(name, sum string) (string, error) {
	if name == "" || strings.Contains(name, "@") {
		return "", fmt.Errorf("image name %q: want repository[:tag], without a digest", name)
	}
	suffix := sum[:contentTagLen]
	repo, tag := name, ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		repo, tag = name[:i], name[i+1:]
	}
	if tag == "" {
		return repo + ":" + suffix, nil
	}
	// A tag has at most 128 characters.
	if len(tag)+1+len(suffix) > 128 {
		return "", fmt.Errorf("image name %q: tag %q too long to carry a content hash (%d characters at most)", name, tag, 128-1-len(suffix))
	}
	return repo + ":" + tag + "-" + suffix, nil
}

// baseImages resolves each image a Dockerfile is built FROM (but scratch
// and its own stages) to "<ref> <image ID>": what the image is made of
// besides its context.
func baseImages(ctx context.Context, cli *client.Client, dockerfile []byte) ([]string, error) {
	var bases []string
	stages := map[string]bool{"scratch": true}
	sc := bufio.NewScanner(bytes.NewReader(dockerfile))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.EqualFold(fields[0], "FROM") {
			continue
		}
		args := fields[1:]
		for len(args) > 0 && strings.HasPrefix(args[0], "--") {
			args = args[1:]
		}
		if len(args) == 0 {
			continue
		}
		from := args[0]
		if !stages[strings.ToLower(from)] {
			ins, err := cli.ImageInspect(ctx, from)
			if err != nil {
				return nil, fmt.Errorf("the image it is built FROM, %s: %w", from, err)
			}
			bases = append(bases, from+" "+ins.ID)
		}
		if len(args) >= 3 && strings.EqualFold(args[1], "AS") {
			stages[strings.ToLower(args[2])] = true
		}
	}
	return bases, sc.Err()
}

// goBuild compiles the Go main package pkg (relative to root, or an import
// path) to out: static for Linux (an image's binary, without the VCS stamp,
// which would change the image at every commit), or for this machine.
func goBuild(ctx context.Context, root, pkg, out string, static bool) error {
	args := []string{"build", "-o", out}
	if static {
		args = []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", out}
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
		b.ref = filepath.Join(dir, baseName(pkg))
		b.err = goBuild(ctx, root, pkg, b.ref, false)
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", pkg, b.err)
	}
	return b.ref
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
