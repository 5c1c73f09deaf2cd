package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/payloadbuild"
)

// copyExample copies examples/counter's sources, Dockerfiles and descriptor into dir/counter (the
// binaries a checkout may hold are left out: the test builds its own).
func copyExample(t *testing.T, dir string) string {
	t.Helper()
	src := filepath.Join(moduleRoot(t), "examples", "counter")
	dst := filepath.Join(dir, "counter")
	for _, f := range []string{"gcompose.yaml", "counter/main.go", "counter/Dockerfile", "front/main.go", "front/Dockerfile"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// goBuild builds the example's binary of one image into its build context, as the tutorial does.
func goBuild(t *testing.T, ctx context.Context, app, which string) {
	t.Helper()
	// main.go named as a file: the copy is outside the module, and needs nothing but the standard library.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", "app", "main.go")
	cmd.Dir = filepath.Join(app, which)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", which, err, out)
	}
}

// TestBuildRefusedOffTheDevnet: a yagna that is not the devnet refuses build: before anything is built or
// planned, naming the build: value and what to do instead.
func TestBuildRefusedOffTheDevnet(t *testing.T) {
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "vm", Count: 1, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.00005, 0.0001, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	app := copyExample(t, e.dir)
	t.Cleanup(func() { removeBuilt(t, e, app) })
	desc := filepath.Join(app, "gcompose.yaml")
	// A yagna that does not answer /devnet/v1/info (404, as yagna for a path it does not serve).
	notDevnet := httptest.NewServer(http.NotFoundHandler())
	defer notDevnet.Close()
	cmd := e.command(ctx, []string{"YAGNA_API_URL=" + notDevnet.URL}, "plan", "-f", desc)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is not the gcompose devnet") || !strings.Contains(string(out), "gvmkit-build <image> --push") ||
		!strings.Contains(string(out), "gcompose.yaml:15:12") {
		t.Fatalf("plan against a yagna that is not the devnet: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "built image") {
		t.Fatalf("the refused plan built an image:\n%s", out)
	}
}

// TestBuildPayloadFromSource: examples/counter deployed from source on the devnet (build:), then its
// front page's source edited: a reconciler's cycle builds the new image (and repairs nothing: the
// descriptor changed), the plan rebuilds the front alone, the deploy rents the new image, and the page
// changes. make test runs the same path through the tutorial's "Your own app" (the docs
// test), so this one is in make golem-sweep.
func TestBuildPayloadFromSource(t *testing.T) {
	golemSweep(t)
	caps := []string{"vpn", "inet", "manifest-support", "start-entrypoint"}
	e := start(t, devnet.Config{Providers: []devnet.ProviderConfig{
		{Name: "vm", Count: 3, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: caps, Coeffs: []float64{0.00005, 0.0001, 0}},
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	app := copyExample(t, e.dir)
	t.Cleanup(func() { removeBuilt(t, e, app) })
	goBuild(t, ctx, app, "counter")
	goBuild(t, ctx, app, "front")
	desc := filepath.Join(app, "gcompose.yaml")

	out1 := e.must(ctx, "deploy", "-f", desc, "--yes")
	if !strings.Contains(out1, "payload counter: built image gcompose-build/counter:") || !strings.Contains(out1, "payload front: built image gcompose-build/front:") {
		t.Errorf("the deploy did not say it built both images:\n%s", out1)
	}
	url := e.field(ctx, "resources.golem-proxy-front", "url")
	if body, err := getWithin(ctx, url, 40); err != nil || body != "Hello from the front: visit 1\n" {
		t.Fatalf("front page at %s: %v %q", url, err, body)
	}

	// Edit the front's source and build its binary: the plan rebuilds the front, and nothing else.
	main := filepath.Join(app, "front", "main.go")
	src, err := os.ReadFile(main)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), `"Hello from the front"`, `"Hello again"`, 1)
	if edited == string(src) {
		t.Fatal("the front's greeting is not in its source")
	}
	if err := os.WriteFile(main, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	goBuild(t, ctx, app, "front")
	// A reconciler's cycle builds the new image as deploy does (before it plans), and repairs nothing:
	// the descriptor's source changed, deploying it stays a person's act.
	rec, _ := e.command(ctx, nil, "reconcile", "-f", desc, "--cycles", "1", "--listen", "", "--lock-timeout", "10s").CombinedOutput()
	if !strings.Contains(string(rec), "payload front: built image gcompose-build/front:") || strings.Contains(string(rec), "payload counter: built") {
		t.Errorf("the reconciler's cycle should have built the front's new image, and only it:\n%s", rec)
	}
	plan := e.must(ctx, "plan", "-f", desc)
	if !regexp.MustCompile(`(?m)^-/\+ rebuild +services\.front `).MatchString(plan) ||
		!regexp.MustCompile(`(?m)^ +~ /payload/params/image_hash = "[0-9a-f]{56}" -> "[0-9a-f]{56}"$`).MatchString(plan) ||
		!strings.Contains(plan, "Plan: 0 to create, 0 to update, 1 to rebuild, 0 to delete, 4 unchanged.") {
		t.Errorf("plan after the front's source changed: want a rebuild of services.front alone:\n%s", plan)
	}
	if strings.Contains(plan, "built image") {
		t.Errorf("the plan built again what the reconciler had built:\n%s", plan)
	}
	out2 := e.must(ctx, "deploy", "-f", desc, "--yes")
	if strings.Contains(out2, "built image") {
		t.Errorf("the deploy built again what the plan had built:\n%s", out2)
	}
	if body, err := getWithin(ctx, url, 40); err != nil || !strings.HasPrefix(body, "Hello again: visit ") {
		t.Fatalf("front page after the rebuild: %v %q", err, body)
	}
	e.must(ctx, "destroy", "-f", desc, "--yes")
	if s := e.summary(ctx); s.Agreements != 0 || s.Networks != 0 {
		t.Fatalf("after destroy: %+v", s)
	}
}

// removeBuilt removes the images the test built from its copy of the example (labelled with their
// context folder, which is the test's own).
func removeBuilt(t *testing.T, e *env, app string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, d := range []string{"counter", "front"} {
		f := filters.NewArgs(filters.Arg("label", payloadbuild.ContextLabel+"="+filepath.Join(app, d)))
		imgs, err := e.docker.ImageList(ctx, image.ListOptions{Filters: f})
		if err != nil {
			t.Logf("listing the built images: %v", err)
			return
		}
		for _, img := range imgs {
			if _, err := e.docker.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
				t.Logf("removing built image %s: %v", img.ID, err)
			}
		}
	}
}
