package testimage_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/internal/testimage/imagegc"
)

func TestImage(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pkg, name = "./internal/testimage/testdata/testadapter", "gcompose-test/testadapter:test"
	ref := testimage.Image(t, ctx, pkg, name)
	if !regexp.MustCompile(`^gcompose-test/testadapter:test-[0-9a-f]{16}$`).MatchString(ref) {
		t.Fatalf("reference %q, want the name with a content hash on its tag", ref)
	}
	if again := testimage.Image(t, ctx, pkg, name); again != ref {
		t.Fatalf("second build %s, first %s", again, ref)
	}
	ins, err := testimage.Client(t).ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	l := ins.Config.Labels
	if l[testimage.Label] != pkg || l[imagegc.LabelName] != name || !strings.HasPrefix(l[imagegc.LabelContent], strings.TrimPrefix(ref, name+"-")) {
		t.Fatalf("image %s labels %v", ins.ID, l)
	}
	if len(ins.Config.Entrypoint) != 1 || ins.Config.Entrypoint[0] != "/testadapter" {
		t.Fatalf("entrypoint %v", ins.Config.Entrypoint)
	}
}

func TestDockerfileImage(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	note := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(note, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testimage.Dockerfile{Path: "internal/testimage/testdata/test.Dockerfile", Mains: []string{"./internal/testimage/testdata/testadapter"},
		Files: map[string]string{"note.txt": note}, Labels: map[string]string{"gcompose.test.extra": "yes"}}
	const name = "gcompose-test/testimage-dockerfile:test"
	ref := testimage.DockerfileImage(t, ctx, d, name)
	if !strings.HasPrefix(ref, name+"-") {
		t.Fatalf("reference %q, want %s-<content hash>", ref, name)
	}
	if again := testimage.DockerfileImage(t, ctx, d, name); again != ref {
		t.Fatalf("second build %s, first %s", again, ref)
	}
	ins, err := testimage.Client(t).ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ins.Config.Labels[testimage.Label] != d.Path || ins.Config.Labels["gcompose.test.extra"] != "yes" {
		t.Fatalf("image %s labels %v", ins.ID, ins.Config.Labels)
	}
	if len(ins.Config.Entrypoint) != 1 || ins.Config.Entrypoint[0] != "/testadapter" {
		t.Fatalf("entrypoint %v", ins.Config.Entrypoint)
	}
}

// TestSameNameDifferentContent is two checkouts whose adapter differs,
// testing at once under the same image name: each must run its own code
// (a fixed tag would be replaced by whichever build ends last).
func TestSameNameDifferentContent(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const name = "gcompose-test/testimage-answer:test"
	refs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs[i] = testimage.Image(t, ctx, fmt.Sprintf("./internal/testimage/testdata/variant%d/answer", i+1), name)
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if refs[0] == refs[1] {
		t.Fatalf("both variants got %s", refs[0])
	}
	for i, ref := range refs {
		if got, want := runImage(t, ctx, ref), fmt.Sprintf("variant %d\n", i+1); got != want {
			t.Errorf("%s printed %q, want %q", ref, got, want)
		}
	}
}

// TestDerivedImageFollowsItsBase: the same Dockerfile text built FROM a
// name that points at another image is another image.
func TestDerivedImageFollowsItsBase(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := testimage.Client(t)
	v1 := testimage.Image(t, ctx, "./internal/testimage/testdata/variant1/answer", "gcompose-test/testimage-answer:test")
	v2 := testimage.Image(t, ctx, "./internal/testimage/testdata/variant2/answer", "gcompose-test/testimage-answer:test")

	// A base named by a content reference: the text differs already.
	d1 := testimage.DerivedImage(t, ctx, "FROM "+v1+"\nENV WHO=derived\n", "gcompose-test/testimage-derived:test")
	d2 := testimage.DerivedImage(t, ctx, "FROM "+v2+"\nENV WHO=derived\n", "gcompose-test/testimage-derived:test")
	if d1 == d2 || !strings.HasPrefix(d1, "gcompose-test/testimage-derived:test-") {
		t.Fatalf("derived from two bases: %s and %s", d1, d2)
	}
	if got := runImage(t, ctx, d2); got != "variant 2\n" {
		t.Errorf("%s printed %q", d2, got)
	}

	// A base named by a plain tag (this test's own, not shared): its image
	// ID is part of the content, so the same text FROM it after it is
	// retagged hashes to another tag.
	// Its text names this process, so its images are removed at the end.
	base := fmt.Sprintf("gcompose-test/testimage-base:pid%d", os.Getpid())
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), base, image.RemoveOptions{}) })
	var hashes []string
	for i, v := range []string{v1, v2} {
		if err := cli.ImageTag(ctx, v, base); err != nil {
			t.Fatal(err)
		}
		// Two names: a test binary builds a Dockerfile once per name.
		name := fmt.Sprintf("gcompose-test/testimage-derived:pid%d-from%d", os.Getpid(), i+1)
		t.Cleanup(func() {
			if _, err := imagegc.Collect(context.Background(), cli, imagegc.Options{Name: name}); err != nil {
				t.Errorf("removing %s: %v", name, err)
			}
		})
		ref := testimage.DerivedImage(t, ctx, "FROM "+base+"\n", name)
		if got, want := runImage(t, ctx, ref), fmt.Sprintf("variant %d\n", i+1); got != want {
			t.Errorf("%s printed %q, want %q", ref, got, want)
		}
		hashes = append(hashes, strings.TrimPrefix(ref, name+"-"))
	}
	if hashes[0] == hashes[1] {
		t.Errorf("the same content hash %s FROM two images", hashes[0])
	}
}

// runImage runs ref to its end and returns its stdout.
func runImage(t *testing.T, ctx context.Context, ref string) string {
	t.Helper()
	cli := testimage.Client(t)
	// Explicit limits, as the runner gives: Podman's defaults may be above
	// what its service may set.
	host := &container.HostConfig{Resources: container.Resources{Ulimits: []*container.Ulimit{
		{Name: "nofile", Soft: 1024, Hard: 1024}, {Name: "nproc", Soft: 1024, Hard: 1024}}}}
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: ref, Labels: testimage.Labels(t)}, host, nil, nil, "")
	if err != nil {
		t.Fatalf("create a container of %s: %v", ref, err)
	}
	if err := cli.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start %s: %v", ref, err)
	}
	waitC, errC := cli.ContainerWait(ctx, c.ID, container.WaitConditionNotRunning)
	select {
	case <-waitC:
	case err := <-errC:
		t.Fatalf("wait for %s: %v", ref, err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, container.LogsOptions{ShowStdout: true})
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestBinary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testimage.Binary(t, ctx, "./internal/testimage/testdata/testadapter")
	if again := testimage.Binary(t, ctx, "./internal/testimage/testdata/testadapter"); again != bin {
		t.Fatalf("second build at %s, first at %s", again, bin)
	}
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode().Perm()&0o100 == 0 || filepath.Base(bin) != "testadapter" {
		t.Fatalf("binary %s: %v, %v", bin, fi, err)
	}
}
