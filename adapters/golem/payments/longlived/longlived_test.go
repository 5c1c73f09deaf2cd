package longlived_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// A sweep sees the long-lived containers of its own yagna node only: the
// same app name deployed through another yagna on this machine is not
// this app, so it is neither reported (a first deploy would refuse over
// it) nor terminated. A container without the node label (an older
// gcompose) is reported by every node's sweep, as before.
func TestSweepSeesItsOwnYagnaNodeOnly(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	img := testimage.DerivedImage(t, ctx, "FROM scratch\nLABEL purpose=longlived-sweep-test\n", "gcompose-test/longlived-sweep:test")
	d, err := longlived.Docker()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const (
		app   = "longlived-sweep-test"
		nodeA = "0x1111111111111111111111111111111111111111"
		nodeB = "0x2222222222222222222222222222222222222222"
	)
	// Created, never started: a sweep lists containers by their labels.
	create := func(resource, lineage, node string) string {
		t.Helper()
		labels := testimage.Labels(t)
		labels[longlived.LabelApp] = app
		labels[longlived.LabelResource] = resource
		labels[longlived.LabelLongLived] = "true"
		labels[longlived.LabelAdapter] = img
		labels[longlived.LabelLineage] = lineage
		if node != "" {
			labels[longlived.LabelNode] = node
		}
		c, err := d.ContainerCreate(ctx, &container.Config{Image: img, Cmd: []string{"/none"}, Labels: labels}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	onA := create("resources.a", "lineage-a", nodeA)
	onB := create("resources.b", "lineage-b", nodeB)
	create("resources.old", "lineage-old", "")

	resources := func(found []protocol.Orphan) []string {
		var out []string
		for _, o := range found {
			out = append(out, o.Resource+":"+o.Action)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name, node, lineage string
		terminate           bool
		only                []string
		want                []string
	}{
		{"a first deploy through A", nodeA, "", false, nil, []string{"resources.a:reported", "resources.old:reported"}},
		{"a first deploy through B", nodeB, "", false, nil, []string{"resources.b:reported", "resources.old:reported"}},
		{"a yagna with no such app", "0x3333333333333333333333333333333333333333", "", false, nil, []string{"resources.old:reported"}},
		{"only another id: nothing terminated", nodeA, "lineage-a", true, []string{"0123456789ab"}, []string{"resources.a:reported", "resources.old:reported"}},
		{"A's own state terminates its orphan", nodeA, "lineage-a", true, nil, []string{"resources.a:terminated", "resources.old:reported"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, err := longlived.Sweep(ctx, d, app, tc.lineage, img, "keeper", tc.node, map[string]bool{}, (&protocol.SweepRequest{Terminate: tc.terminate, Only: tc.only}).Terminates)
			if err != nil {
				t.Fatal(err)
			}
			if got := resources(found); !slices.Equal(got, tc.want) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
		})
	}
	if _, err := d.ContainerInspect(ctx, onA); !client.IsErrNotFound(err) {
		t.Fatalf("A's orphan still exists after its sweep terminated it: %v", err)
	}
	if _, err := d.ContainerInspect(ctx, onB); err != nil {
		t.Fatalf("B's container was touched by A's sweep: %v", err)
	}
}
