package testimage_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gcompose/gcompose/internal/testimage"
)

func TestBuild(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const pkg, tag = "./internal/testimage/testdata/testadapter", "gcompose/testadapter:test"
	id := testimage.Build(t, ctx, pkg, tag)
	if again := testimage.Build(t, ctx, pkg, tag); again != id {
		t.Fatalf("second build %s, first %s", again, id)
	}
	ins, err := testimage.Client(t).ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ins.ID != id || ins.Config.Labels[testimage.Label] != pkg {
		t.Fatalf("image %s labels %v", ins.ID, ins.Config.Labels)
	}
	if len(ins.Config.Entrypoint) != 1 || ins.Config.Entrypoint[0] != "/testadapter" {
		t.Fatalf("entrypoint %v", ins.Config.Entrypoint)
	}
}

func TestBuildDockerfile(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	note := filepath.Join(t.TempDir(), "note.txt")
	if err := os.WriteFile(note, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := testimage.Dockerfile{Path: "internal/testimage/testdata/test.Dockerfile", Mains: []string{"./internal/testimage/testdata/testadapter"},
		Files: map[string]string{"note.txt": note}, Labels: map[string]string{"gcompose.test.extra": "yes"}}
	const tag = "gcompose/testimage-dockerfile:test"
	id := testimage.BuildDockerfile(t, ctx, d, tag)
	if again := testimage.BuildDockerfile(t, ctx, d, tag); again != id {
		t.Fatalf("second build %s, first %s", again, id)
	}
	ins, err := testimage.Client(t).ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if ins.ID != id || ins.Config.Labels[testimage.Label] != d.Path || ins.Config.Labels["gcompose.test.extra"] != "yes" {
		t.Fatalf("image %s labels %v", ins.ID, ins.Config.Labels)
	}
	if len(ins.Config.Entrypoint) != 1 || ins.Config.Entrypoint[0] != "/testadapter" {
		t.Fatalf("entrypoint %v", ins.Config.Entrypoint)
	}
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
