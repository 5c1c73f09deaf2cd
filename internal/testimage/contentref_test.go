package testimage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/internal/testimage/imagegc"
)

func TestContentRef(t *testing.T) {
	sum := strings.Repeat("0123456789abcdef", 4)
	for _, c := range []struct{ name, want, err string }{
		{"gcompose-test/file-adapter:e2e", "gcompose-test/file-adapter:e2e-0123456789abcdef", ""},
		{"gcompose-test/file-adapter", "gcompose-test/file-adapter:0123456789abcdef", ""},
		{"localhost:5000/x", "localhost:5000/x:0123456789abcdef", ""},
		{"localhost:5000/x:init-hang", "localhost:5000/x:init-hang-0123456789abcdef", ""},
		{"x:" + strings.Repeat("t", 111), "x:" + strings.Repeat("t", 111) + "-0123456789abcdef", ""},
		{"x:" + strings.Repeat("t", 112), "", "too long"},
		{"x@sha256:" + sum, "", "without a digest"},
		{"", "", "want repository"},
	} {
		got, err := contentRef(c.name, sum)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.name) {
				t.Errorf("contentRef(%q): %q, %v; want an error naming it, with %q", c.name, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("contentRef(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

// TestReuseDatesTheUse: taking an image from the cache tags it again, so
// that imagegc sees it in use.
func TestReuseDatesTheUse(t *testing.T) {
	RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli := Client(t)
	const name = "gcompose-test/testimage-reuse:test"
	labels := map[string]string{Label: "derived"}
	ref, err := ensure(ctx, name, []byte("FROM scratch\nLABEL purpose=reuse-test\n"), nil, labels)
	if err != nil {
		t.Fatal(err)
	}
	before, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if before.Config.Labels[imagegc.LabelName] != name {
		t.Fatalf("labels %v", before.Config.Labels)
	}
	if before.Metadata.LastTagTime.IsZero() {
		t.Skip("this Engine records no last tag time")
	}
	time.Sleep(10 * time.Millisecond)
	again, err := ensure(ctx, name, []byte("FROM scratch\nLABEL purpose=reuse-test\n"), nil, labels)
	if err != nil || again != ref {
		t.Fatalf("second ensure: %q, %v; want %q", again, err, ref)
	}
	after, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if after.ID != before.ID || !after.Metadata.LastTagTime.After(before.Metadata.LastTagTime) {
		t.Errorf("after reuse: image %s last tagged %v; before %s at %v", after.ID, after.Metadata.LastTagTime, before.ID, before.Metadata.LastTagTime)
	}
}
