package testimage_test

import (
	"context"
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
