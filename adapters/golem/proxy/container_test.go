package proxy_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestLongLivedProxyContainer starts the proxy as a long-lived container the
// way the adapter does: the secrets reach it on stdin only, it reports
// ready once it listens, Find sees it, Remove removes it; a container that
// cannot start fails Start with its log tail.
func TestLongLivedProxyContainer(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	img := testimage.Image(t, ctx, "./cmd/golem-proxy", "gcompose-test/golem-proxy:longlived")
	d, err := longlived.Docker()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	app := "longlived-test"
	lineage := "0f3a9c1e-lineage-a"
	res := "resources.golem-proxy-x"
	t.Cleanup(func() { _ = longlived.Remove(context.Background(), d, app, lineage, res) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	const secret = "longlived-secret-key"
	spec := longlived.Spec{App: app, Lineage: lineage, Resource: res, Image: img,
		Args:    []string{"proxy", "--network", "n1", "--ip", "10.0.0.2", "--map", "http:127.0.0.1:" + itoa(port) + "=80"},
		Secrets: map[string]string{"YAGNA_API_URL": "http://127.0.0.1:9", "YAGNA_APPKEY": secret},
		Config:  map[string]any{"ip": "10.0.0.2"}, Labels: testimage.Labels(t)}
	id, err := longlived.Start(ctx, d, spec, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := longlived.Find(ctx, d, app, lineage, res)
	if err != nil || c == nil || !c.Running || c.ID != id || c.Config != longlived.Fingerprint(spec.Config) {
		t.Fatalf("Find = %+v, %v", c, err)
	}
	// Another state of the same app name (another checkout, another CI
	// job) neither sees nor removes it, and names its own differently.
	other := "77d2b5aa-lineage-b"
	if oc, err := longlived.Find(ctx, d, app, other, res); err != nil || oc != nil {
		t.Fatalf("another lineage finds %+v, %v", oc, err)
	}
	if err := longlived.Remove(ctx, d, app, other, res); err != nil {
		t.Fatal(err)
	}
	if c2, _ := longlived.Find(ctx, d, app, lineage, res); c2 == nil || c2.ID != id {
		t.Fatal("another lineage's Remove removed this one")
	}
	if longlived.Name(app, lineage, res) == longlived.Name(app, other, res) || !strings.Contains(longlived.Name(app, lineage, res), "0f3a9c1e") {
		t.Fatalf("names %s and %s", longlived.Name(app, lineage, res), longlived.Name(app, other, res))
	}
	if ins, err := d.ContainerInspect(ctx, id); err != nil || ins.Name != "/"+longlived.Name(app, lineage, res) || c.Labels["gcompose.lineage"] != lineage {
		t.Fatalf("container name %q (%v), labels %v", ins.Name, err, c.Labels)
	}
	if c.Labels["gcompose.longlived"] != "true" || c.Labels["gcompose.app"] != app {
		t.Fatalf("labels %v", c.Labels)
	}
	if _, ok := c.Labels["gcompose.managed"]; ok {
		t.Fatal("a long-lived container must not carry gcompose.managed")
	}
	ins, err := d.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(ins)
	if strings.Contains(string(raw), secret) {
		t.Fatal("docker inspect shows the secret")
	}
	// The same limits as adapter containers.
	if hc := ins.HostConfig; hc.Memory != runner.DefaultMemory || hc.PidsLimit == nil || *hc.PidsLimit != runner.DefaultPids || hc.NanoCPUs != int64(runner.DefaultCPUs*1e9) {
		t.Fatalf("limits: memory %d, pids %v, cpus %d; want an adapter's %d, %d, %v", hc.Memory, hc.PidsLimit, hc.NanoCPUs, runner.DefaultMemory, runner.DefaultPids, runner.DefaultCPUs)
	}
	// It listens on loopback.
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(port), 5*time.Second)
	if err != nil {
		t.Fatalf("proxy not listening: %v", err)
	}
	conn.Close()
	if err := longlived.Remove(ctx, d, app, lineage, res); err != nil {
		t.Fatal(err)
	}
	if c, err := longlived.Find(ctx, d, app, lineage, res); err != nil || c != nil {
		t.Fatalf("after Remove: %+v %v", c, err)
	}

	// A process that exits at once: Start fails with its output.
	bad := spec
	bad.Args = []string{"proxy", "--network", "n1"}
	if _, err := longlived.Start(ctx, d, bad, 20*time.Second); err == nil || !strings.Contains(err.Error(), "usage: proxy") {
		t.Fatalf("Start of a failing container: %v", err)
	}
	if c, _ := longlived.Find(ctx, d, app, lineage, res); c != nil {
		t.Fatal("a container that failed to start is left behind")
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
