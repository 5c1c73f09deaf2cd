package imagegc_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/internal/testimage/imagegc"
)

// TestCollect removes the images of one name unused for the given time,
// but the one to keep and one a container uses, and no other name's.
func TestCollect(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cli := testimage.Client(t)
	// Names of this process only: a run beside this one keeps its images.
	name := fmt.Sprintf("gcompose-test/imagegc:pid%d", os.Getpid())
	other := fmt.Sprintf("gcompose-test/imagegc-other:pid%d", os.Getpid())
	t.Cleanup(func() {
		for _, n := range []string{name, other} {
			if _, err := imagegc.Collect(context.Background(), cli, imagegc.Options{Name: n}); err != nil {
				t.Errorf("removing what the test built: %v", err)
			}
		}
	})
	adapter := testimage.Image(t, ctx, "./internal/testimage/testdata/variant1/answer", "gcompose-test/testimage-answer:test")
	keep := testimage.DerivedImage(t, ctx, "FROM scratch\nLABEL imagegc=keep\n", name)
	stale := testimage.DerivedImage(t, ctx, "FROM scratch\nLABEL imagegc=stale\n", name)
	used := testimage.DerivedImage(t, ctx, "FROM "+adapter+"\nLABEL imagegc=used\n", name)
	otherName := testimage.DerivedImage(t, ctx, "FROM scratch\nLABEL imagegc=stale\n", other)
	if _, err := cli.ContainerCreate(ctx, &container.Config{Image: used, Labels: testimage.Labels(t)}, nil, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	id := func(ref string) string {
		t.Helper()
		ins, err := cli.ImageInspect(ctx, ref)
		if err != nil {
			t.Fatalf("inspect %s: %v", ref, err)
		}
		return ins.ID
	}
	exists := func(ref string) bool {
		_, err := cli.ImageInspect(ctx, ref)
		return err == nil
	}

	res, err := imagegc.Collect(ctx, cli, imagegc.Options{Name: name, UnusedFor: time.Hour})
	if err != nil || len(res.Removed) != 0 || len(res.InUse) != 0 {
		t.Fatalf("images just used, unused for an hour: %+v, %v", res, err)
	}

	res, err = imagegc.Collect(ctx, cli, imagegc.Options{Name: name, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := removedIDs(res); fmt.Sprint(got) != fmt.Sprint(sorted(id(keep), id(stale), id(used))) {
		t.Errorf("dry run listed %v, want %s, %s, %s", got, keep, stale, used)
	}
	for _, ref := range []string{keep, stale, used} {
		if !exists(ref) {
			t.Fatalf("dry run removed %s", ref)
		}
	}

	res, err = imagegc.Collect(ctx, cli, imagegc.Options{Name: name, Keep: id(keep)})
	if err != nil {
		t.Fatal(err)
	}
	if exists(stale) {
		t.Errorf("%s, unused for 0s, is still there", stale)
	}
	if _, ok := res.InUse[id(used)]; !ok || !exists(used) {
		t.Errorf("in use %v; want %s, which a container uses, kept", res.InUse, used)
	}
	if !exists(keep) || !exists(otherName) {
		t.Errorf("%s (to keep) or %s (another name) removed", keep, otherName)
	}
	// Podman names the image docker.io/<name>.
	if len(res.Removed) != 1 || len(res.Removed[0].Refs) != 1 || strings.TrimPrefix(res.Removed[0].Refs[0], "docker.io/") != stale {
		t.Errorf("removed %+v; want %s alone", res.Removed, stale)
	}
}

func removedIDs(res imagegc.Result) []string {
	var ids []string
	for _, r := range res.Removed {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	return ids
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}
