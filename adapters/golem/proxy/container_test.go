package proxy_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/payments/longlived"
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
	img := "gcompose-test/golem-proxy:longlived"
	testimage.Build(t, ctx, "./cmd/golem-proxy", img)
	d, err := longlived.Docker()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	app := "longlived-test"
	res := "resources.golem-proxy-x"
	t.Cleanup(func() { _ = longlived.Remove(context.Background(), d, app, res) })

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	const secret = "longlived-secret-key"
	spec := longlived.Spec{App: app, Resource: res, Image: img,
		Args:    []string{"proxy", "--network", "n1", "--ip", "10.0.0.2", "--map", "http:127.0.0.1:" + itoa(port) + "=80"},
		Secrets: map[string]string{"YAGNA_API_URL": "http://127.0.0.1:9", "YAGNA_APPKEY": secret},
		Config:  map[string]any{"ip": "10.0.0.2"}, Labels: testimage.Labels(t)}
	id, err := longlived.Start(ctx, d, spec, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := longlived.Find(ctx, d, app, res)
	if err != nil || c == nil || !c.Running || c.ID != id || c.Config != longlived.Fingerprint(spec.Config) {
		t.Fatalf("Find = %+v, %v", c, err)
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
	// It listens on loopback.
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+itoa(port), 5*time.Second)
	if err != nil {
		t.Fatalf("proxy not listening: %v", err)
	}
	conn.Close()
	if err := longlived.Remove(ctx, d, app, res); err != nil {
		t.Fatal(err)
	}
	if c, err := longlived.Find(ctx, d, app, res); err != nil || c != nil {
		t.Fatalf("after Remove: %+v %v", c, err)
	}

	// A process that exits at once: Start fails with its output.
	bad := spec
	bad.Args = []string{"proxy", "--network", "n1"}
	if _, err := longlived.Start(ctx, d, bad, 20*time.Second); err == nil || !strings.Contains(err.Error(), "usage: proxy") {
		t.Fatalf("Start of a failing container: %v", err)
	}
	if c, _ := longlived.Find(ctx, d, app, res); c != nil {
		t.Fatal("a container that failed to start is left behind")
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}
