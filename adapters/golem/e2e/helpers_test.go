package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/openapi"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// The golem.image.hash of the demo images, as examples/webapp names them.
const (
	dbHash  = "31f814403334f67b62dc243ef54431551d376744d40eed7ae86f8408"
	webHash = "6dae7f268c5ae29ffa06386915da1d7f5bc2ea26b6834fd66638747b"
	appKey  = "e2e-appkey-not-secret"
)

// Adapter images built from this tree for the tests.
var adapterImages = map[string]string{
	"network":  "gcompose-test/golem-network:e2e",
	"service":  "gcompose-test/golem-service:e2e",
	"payments": "gcompose-test/golem-payments:e2e",
	"proxy":    "gcompose-test/golem-proxy:e2e",
}

type env struct {
	t        *testing.T
	url      string
	yc       *yagna.Client
	docker   *client.Client
	instance string
	app      string
	state    string
	bin      string
	dir      string
	srv      *devnet.Server
	// devnetLog is everything the devnet logged: searched for the app key.
	devnetLog *syncwriter.Buffer
}

var unsafe = regexp.MustCompile(`[^a-z0-9]+`)

// start builds the images and the CLI, and runs a devnet on a loopback
// port; when the test ends the devnet is closed and nothing labelled for it
// or for the app may be left.
func start(t *testing.T, cfg devnet.Config) *env {
	t.Helper()
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, name := range []string{"network", "service", "payments", "proxy"} {
		testimage.Build(t, ctx, "./cmd/golem-"+name, adapterImages[name])
	}
	e := startDevnet(t, cfg)
	e.bin = gcomposeBinary(t, ctx)
	return e
}

// startDevnet runs a devnet (checked against the OpenAPI files) with the
// demo images, for tests that call the adapters in-process (inproc_test.go)
// rather than through the CLI and the adapter images.
func startDevnet(t *testing.T, cfg devnet.Config) *env {
	t.Helper()
	testimage.RequireDocker(t)
	docker := testimage.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	demoImages(t, ctx, docker)

	id := strings.Trim(unsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(id) > 40 {
		id = id[:40]
	}
	cfg.Instance = "e2e-" + id
	cfg.Labels = testimage.Labels(t)
	cfg.Images = map[string]string{dbHash: "gcompose-test/devnet-db:e2e", webHash: "gcompose-test/devnet-web:e2e"}
	if len(cfg.Providers) == 0 {
		cfg.Providers = []devnet.ProviderConfig{
			{Name: "small", Count: 2, Cores: 2, MemGib: 4, StorageGib: 20, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.00005, 0.0001, 0}},
			{Name: "large", Count: 3, Cores: 4, MemGib: 8, StorageGib: 64, Capabilities: []string{"vpn", "inet"}, Coeffs: []float64{0.0001, 0.0002, 0}},
		}
	}
	devnetLog := &syncwriter.Buffer{}
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(os.Stderr, devnetLog), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := devnet.New(ctx, devnet.Options{Config: cfg, AppKey: appKey, Docker: docker, Logger: logger})
	if err != nil {
		t.Fatalf("devnet.New: %v", err)
	}
	// Every exchange the adapters make is checked against the OpenAPI files.
	checker, err := openapi.NewChecker()
	if err != nil {
		t.Fatalf("openapi: %v", err)
	}
	// What a real yagna answers beyond the spec (408s of unreachable providers, 504s) is exempt.
	checker.Exempt = devnet.BeyondSpec
	checked, direct := checker.Handler(srv.Handler()), srv.Handler()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The devnet's own endpoints, the websocket tunnel and SSE are outside
		// the spec's JSON description.
		_, _, err := checker.Spec.Find(r.Method, r.URL.Path)
		if err != nil || r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			direct.ServeHTTP(w, r)
			return
		}
		checked.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	e := &env{devnetLog: devnetLog, t: t, url: "http://" + ln.Addr().String(), docker: docker, instance: cfg.Instance, app: cfg.Instance,
		state: filepath.Join(t.TempDir(), "state"), dir: t.TempDir(), srv: srv}
	e.yc = yagna.New(e.url, appKey)
	t.Cleanup(func() {
		checker.Report(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Whatever a failed test left of the app goes first.
		e.removeApp(ctx)
		_ = hs.Close()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("devnet Close: %v", err)
		}
		f := filters.NewArgs(filters.Arg("label", "gcompose.devnet="+cfg.Instance))
		if cs, err := docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err != nil || len(cs) != 0 {
			t.Errorf("after Close: %d devnet containers left (err %v)", len(cs), err)
		}
		if ns, err := docker.NetworkList(ctx, network.ListOptions{Filters: f}); err != nil || len(ns) != 0 {
			t.Errorf("after Close: %d devnet networks left (err %v)", len(ns), err)
		}
	})
	return e
}

// removeApp removes the app's long-lived containers (a failed test's leftovers).
func (e *env) removeApp(ctx context.Context) {
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+e.app))
	cs, _ := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	for _, c := range cs {
		_ = e.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

// settle waits until the adapter call containers of the previous CLI run
// are gone: the engine's start-up cleanup fails on a container whose
// removal is still in progress (see the report on core/runner).
func (e *env) settle(ctx context.Context) {
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+e.app), filters.Arg("label", "gcompose.managed"))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		cs, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil || len(cs) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noKeyLeak checks that the app key is in no state file and in no part of
// the long-lived containers that docker inspect shows (env, args, labels).
func (e *env) noKeyLeak(ctx context.Context) {
	e.t.Helper()
	if strings.Contains(e.devnetLog.String(), appKey) {
		e.t.Errorf("the devnet's log holds the app key")
	}
	err := filepath.WalkDir(e.state, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(appKey)) {
			e.t.Errorf("state file %s holds the app key", path)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+e.app), filters.Arg("label", "gcompose.longlived=true"))
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(cs) < 2 {
		e.t.Fatalf("%d long-lived containers, want the keeper and the proxy", len(cs))
	}
	for _, c := range cs {
		ins, err := e.docker.ContainerInspect(ctx, c.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		b, _ := json.Marshal(ins)
		if bytes.Contains(b, []byte(appKey)) {
			e.t.Errorf("docker inspect of %s shows the app key", c.Names)
		}
		if _, managed := ins.Config.Labels["gcompose.managed"]; managed {
			e.t.Errorf("%s is labelled gcompose.managed (removed after a crash as if it were an adapter call)", c.Names)
		}
	}
}

// appContainers counts the app's containers (long-lived or adapter calls).
func (e *env) appContainers(ctx context.Context) int {
	f := filters.NewArgs(filters.Arg("label", "gcompose.app="+e.app))
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(cs)
}

// gcompose runs the CLI against the devnet and returns its combined output.
func (e *env) gcompose(ctx context.Context, args ...string) (string, error) {
	e.t.Helper()
	cmd := e.command(ctx, nil, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// command is the CLI command gcompose runs, with env added to its
// environment, not started.
func (e *env) command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	e.t.Helper()
	var full []string
	if args[0] == "state" {
		full = append(full, args[:2]...)
		full = append(full, "--app", e.app, "--state", e.state)
		full = append(full, args[2:]...)
	} else {
		full = append(full, args[0], "--app", e.app, "--state", e.state,
			"--network-image", adapterImages["network"], "--service-image", adapterImages["service"],
			"--payments-image", adapterImages["payments"], "--proxy-image", adapterImages["proxy"])
		full = append(full, args[1:]...)
	}
	e.settle(ctx)
	cmd := exec.CommandContext(ctx, e.bin, full...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "YAGNA_API_URL="+e.url, "YAGNA_APPKEY="+appKey, "XDG_CACHE_HOME="+filepath.Join(e.dir, "cache"))
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func (e *env) must(ctx context.Context, args ...string) string {
	e.t.Helper()
	out, err := e.gcompose(ctx, args...)
	if err != nil {
		e.t.Fatalf("gcompose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if strings.Contains(out, appKey) {
		e.t.Fatalf("gcompose %s printed the app key", args[0])
	}
	return out
}

// planOps runs gcompose plan --json and returns the op of each resource.
func (e *env) planOps(ctx context.Context, descriptor string) map[string]string {
	e.t.Helper()
	out, err := e.gcompose(ctx, "plan", "--json", "-f", descriptor)
	if err != nil {
		e.t.Fatalf("gcompose plan: %v\n%s", err, out)
	}
	start := strings.Index(out, "{")
	var p struct {
		Steps []struct {
			Resource string `json:"resource"`
			Op       string `json:"op"`
		} `json:"steps"`
	}
	if start < 0 || json.Unmarshal([]byte(out[start:]), &p) != nil {
		e.t.Fatalf("plan --json output:\n%s", out)
	}
	ops := map[string]string{}
	for _, s := range p.Steps {
		ops[s.Resource] = s.Op
	}
	return ops
}

// summary is the devnet's count of what is alive.
func (e *env) summary(ctx context.Context) devnet.Summary {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.url+devnet.AdminPrefix+"/summary", nil)
	req.Header.Set("Authorization", "Bearer "+appKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s devnet.Summary
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) kill(ctx context.Context, activityID string) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url+devnet.AdminPrefix+"/activities/"+activityID+"/kill", nil)
	req.Header.Set("Authorization", "Bearer "+appKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		e.t.Fatalf("kill activity %s: HTTP %d", activityID, resp.StatusCode)
	}
}

// show reads one resource from `gcompose state show` as JSON-ish text and
// returns the value of a "key": "value" line.
func (e *env) field(ctx context.Context, resource, key string) string {
	e.t.Helper()
	out := e.must(ctx, "state", "show", resource)
	m := regexp.MustCompile(`"` + regexp.QuoteMeta(key) + `":\s*"([^"]*)"`).FindStringSubmatch(out)
	if m == nil {
		e.t.Fatalf("no %q in state of %s:\n%s", key, resource, out)
	}
	return m[1]
}

func get(ctx context.Context, url string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return string(b), err
}

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// gcomposeBinary builds the CLI once per test binary run.
func gcomposeBinary(t *testing.T, ctx context.Context) string {
	t.Helper()
	cliOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gcompose-e2e-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "gcompose")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", cliPath, "./cmd/gcompose")
		cmd.Dir = moduleRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			cliErr = fmt.Errorf("go build ./cmd/gcompose: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var demoOnce sync.Once

// demoImages builds images/devnet-db.Dockerfile and images/devnet-web.Dockerfile
// (busybox, devnet-init and the demo binary) as gcompose-test/devnet-*:e2e.
func demoImages(t *testing.T, ctx context.Context, docker *client.Client) {
	t.Helper()
	if _, err := os.Stat("/bin/busybox"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("/bin/busybox missing (apt-get install -y busybox-static): %v", err)
		}
		t.Skip("/bin/busybox missing (apt-get install -y busybox-static)")
	}
	var err error
	demoOnce.Do(func() {
		for _, name := range []string{"devnet-db", "devnet-web"} {
			if err = buildDemo(ctx, docker, moduleRoot(t), name); err != nil {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

func buildDemo(ctx context.Context, docker *client.Client, root, name string) error {
	dir, err := os.MkdirTemp("", "gcompose-e2e-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, bin := range []string{"devnet-init", name} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", filepath.Join(dir, bin), "./cmd/"+bin)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", bin, err, out)
		}
	}
	files := map[string]string{"busybox": "/bin/busybox", "devnet-init": filepath.Join(dir, "devnet-init"),
		name: filepath.Join(dir, name), "Dockerfile": filepath.Join(root, "images", name+".Dockerfile")}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := docker.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{"gcompose-test/" + name + ":e2e"}, Dockerfile: "Dockerfile", Remove: true, ForceRemove: true,
		Labels: map[string]string{testimage.Label: "golem-e2e"},
	})
	if err != nil {
		return fmt.Errorf("image build %s: %w", name, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("image build %s output: %w", name, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("image build %s: %s", name, msg.Error)
		}
	}
}
