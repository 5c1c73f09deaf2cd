package lowering

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/descriptor"
	"github.com/gcompose/gcompose/core/resolve"
)

func load(t *testing.T, files ...string) *resolve.Resolved {
	t.Helper()
	app, diags := descriptor.Load(context.Background(), descriptor.Options{}, files...)
	if len(diags.Errors()) > 0 {
		t.Fatalf("load: %v", diags)
	}
	r, rd := resolve.Resolve(app, resolve.Options{Outputs: Outputs(), Implicit: Golem{}.Implicit})
	if len(rd.Errors()) > 0 {
		t.Fatalf("resolve: %v", rd)
	}
	return r
}

func TestGolemLowering(t *testing.T) {
	res, err := Resources(load(t, "../../../examples/webapp/webapp.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"networks.default", "resources.golem-payments", "resources.golem-proxy-web-service", "services.db-service", "services.web-service"}
	if !slices.Equal(names, want) {
		t.Fatalf("resources %v, want %v", names, want)
	}
	web := res["services.web-service"]
	if web.Type != DefaultImages().Service || web.Config["allocation_id"] != "${resources.golem-payments.state.allocation_id}" ||
		!slices.Contains(web.DependsOn, PaymentsResource) || !slices.Contains(web.DependsOn, "services.db-service") {
		t.Fatalf("web: %+v", web)
	}
	px := res["resources.golem-proxy-web-service"]
	if px.Type != DefaultImages().Proxy || px.Config["ip"] != "${services.web-service.network_node.ip}" ||
		px.Config["network_id"] != "${networks.default.network_id}" || !slices.Contains(px.DependsOn, "services.web-service") {
		t.Fatalf("proxy: %+v", px)
	}
	// No platform by default: the payments adapter picks a funded account.
	if p := res[PaymentsResource]; p.Type != DefaultImages().Payments || p.Config["budget"] != DefaultBudget || p.Config["platform"] != nil {
		t.Fatalf("payments: %+v", p)
	}
}

func TestLocalHTTPProxyRuntime(t *testing.T) {
	// A local-http-proxy service is not rented: it proxies the service it depends on.
	res, err := Resources(load(t, "testdata/local-proxy.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	px := res["services.proxy"]
	if px == nil || px.Type != DefaultImages().Proxy || px.Config["ip"] != "${services.web.network_node.ip}" {
		t.Fatalf("services.proxy: %+v", px)
	}
	if _, ok := res["resources.golem-proxy-web"]; ok {
		t.Fatal("web has no http_proxy of its own")
	}
}

// TestEngineSocket: the Docker-socket plug mounts the socket of the engine
// DOCKER_HOST names, and says what to do when it names
// no socket.
func TestEngineSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "podman.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.sock")
	if err := os.Symlink(sock, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, path, err string }{
		{"", "/var/run/docker.sock", ""},
		{"unix:///var/run/docker.sock", "/var/run/docker.sock", ""},
		{"unix:///run/podman/podman.sock", "/run/podman/podman.sock", ""},
		{"unix://" + sock, sock, ""},
		{"unix://" + link, link, ""}, // the engine follows the link
		{"tcp://127.0.0.1:2376", "", "DOCKER_HOST=tcp://127.0.0.1:2376 is not a unix socket: the Golem payments and proxy adapters run their long-lived containers through the engine's socket"},
		{"ssh://me@engine", "", "an engine reached over ssh has none on this machine"},
		{"nonsense", "", "DOCKER_HOST=nonsense: "},
	} {
		pl := ImplicitPlugs(Images{}, tc.host)[DockerPlug]
		if pl.Path != tc.path || (tc.err == "") != (pl.Err == nil) || (pl.Err != nil && !strings.Contains(pl.Err.Error(), tc.err)) {
			t.Errorf("DOCKER_HOST=%q: plug path %q, err %v; want %q, an error with %q", tc.host, pl.Path, pl.Err, tc.path, tc.err)
		}
	}
}

func TestImplicitPlugsOnlyForLongLivedAdapters(t *testing.T) {
	pl := ImplicitPlugs(Images{}, "")[DockerPlug]
	if pl.Path != "/var/run/docker.sock" {
		t.Fatal(pl.Path)
	}
	match := func(image string) bool {
		for _, p := range pl.ResourceTypes {
			if regexp.MustCompile("^(?:" + p + ")").MatchString(image) {
				return true
			}
		}
		return false
	}
	for img, want := range map[string]bool{
		"gcompose/golem-payments:dev": true, "gcompose/golem-proxy:dev": true,
		"gcompose/golem-service:dev": false, "gcompose/golem-network:dev": false, "gcompose/golem-proxy:dev-evil": false,
	} {
		if match(img) != want {
			t.Errorf("%s: offered %v, want %v", img, !want, want)
		}
	}
}

func TestPaymentsSetByTheDescriptor(t *testing.T) {
	res, err := Resources(load(t, "testdata/budget.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	p := res[PaymentsResource]
	if _, named := p.Config["platform"]; p.Config["budget"] != "20" || named {
		t.Fatalf("payments config %v", p.Config)
	}
	if !slices.Contains(res["services.web"].DependsOn, PaymentsResource) {
		t.Fatal("web does not depend on the payments")
	}
	if _, err := Resources(load(t, "testdata/budget.yaml"), Images{Payments: "other/payments:1"}); err == nil {
		t.Fatal("a payments resource of another type must be refused")
	}
}

// protect: true guards every instance of a service and a generic resource
// in the plan; it is not part of what their adapters are told.
func TestProtectReachesThePlanNotTheAdapter(t *testing.T) {
	res, err := Resources(load(t, "testdata/protect.yaml"), Images{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"services.db[0]": true, "services.db[1]": true, "resources.files": true, "services.web": false, "networks.default": false} {
		r := res[name]
		if r == nil {
			t.Fatalf("no resource %s", name)
		}
		if r.Protect != want {
			t.Errorf("%s: protect %v, want %v", name, r.Protect, want)
		}
		if _, ok := r.Config["protect"]; ok {
			t.Errorf("%s: protect is in the adapter's config", name)
		}
	}
}
