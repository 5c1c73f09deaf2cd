package registry_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/devnet/devnettest"
	"github.com/gcompose/gcompose/adapters/golem/registry"
	"github.com/gcompose/gcompose/internal/testimage"
)

// The image the devnet's registry answers for, by its labels (devnet
// registry.go): a tag and a hash of this test's own.
const (
	testTag  = "gcompose-test/registry-client:v1"
	testHash = "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
)

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// serveDevnet runs a devnet whose images map holds one image labelled with
// testTag and testHash, and returns its URL behind a proxy that counts the
// requests it passes on.
func serveDevnet(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker := testimage.Client(t)
	ref := testimage.DerivedImage(t, ctx, "FROM scratch\nLABEL golem.image.tag=\""+testTag+"\" golem.image.hash=\""+testHash+"\"\n", "gcompose-test/registry-client:e2e")
	instance := "test-" + strings.ToLower(unsafeChars.ReplaceAllString(t.Name(), "-"))
	cfg := devnet.Config{Instance: instance, Labels: testimage.Labels(t), Images: map[string]string{testHash: ref}}
	srv, err := devnet.New(ctx, devnet.Options{Config: cfg, AppKey: "registry-test-key", Docker: docker, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatalf("devnet.New: %v", err)
	}
	u, err := url.Parse(devnettest.Serve(t, docker, srv, instance, nil))
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	proxy := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front.URL, &n
}

func TestResolve(t *testing.T) {
	base, asked := serveDevnet(t)
	ctx := context.Background()
	c, err := registry.FromEnv(func(k string) string {
		if k == registry.EnvURL {
			return base + "/"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	want := base + "/download/" + testHash

	img, err := c.ByTag(ctx, testTag)
	if err != nil {
		t.Fatalf("ByTag(%s): %v", testTag, err)
	}
	if img.SHA3 != testHash || img.HTTP != want || img.HTTPS != want {
		t.Errorf("ByTag(%s) = %+v, want sha3 %s at %s", testTag, img, testHash, want)
	}
	if got := img.TaskPackage(false); got != "hash:sha3:"+testHash+":"+want {
		t.Errorf("TaskPackage = %q", got)
	}
	// Asked again: answered from the cache.
	before := asked.Load()
	if again, err := c.ByTag(ctx, testTag); err != nil || again != img {
		t.Errorf("ByTag again = %+v, %v; want %+v", again, err, img)
	}
	if asked.Load() != before {
		t.Errorf("a second ByTag(%s) asked the registry again", testTag)
	}

	byHash, err := c.ByHash(ctx, "sha3:"+strings.ToUpper(testHash))
	if err != nil {
		t.Fatalf("ByHash: %v", err)
	}
	if byHash.SHA3 != testHash || byHash.HTTP != want {
		t.Errorf("ByHash = %+v, want sha3 %s at %s", byHash, testHash, want)
	}

	// The URL answered is one the devnet serves (yapapi's check_package_url
	// sends HEAD to an image URL).
	for _, m := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(m, img.HTTP, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: %d, want 200", m, img.HTTP, resp.StatusCode)
		}
	}
}

func TestResolveUnknown(t *testing.T) {
	base, _ := serveDevnet(t)
	ctx := context.Background()
	c, err := registry.New(base)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ByTag(ctx, "gcompose-test/no-such-image:v9")
	if !registry.IsNotFound(err) {
		t.Fatalf("ByTag of an unknown tag: %v, want the registry's 404", err)
	}
	for _, s := range []string{"gcompose-test/no-such-image:v9", base, "404"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	other := strings.Repeat("f", 56)
	if _, err := c.ByHash(ctx, other); !registry.IsNotFound(err) || !strings.Contains(err.Error(), other) {
		t.Errorf("ByHash of an unknown hash: %v, want the registry's 404 naming it", err)
	}
	if _, err := c.ByHash(ctx, "1234"); err == nil || !strings.Contains(err.Error(), "56 hex") {
		t.Errorf("ByHash(1234): %v, want a refusal of the hash", err)
	}
}

// A registry that does not answer, or answers something else than an image.
func TestResolveFailures(t *testing.T) {
	if _, err := registry.New("registry.golem.network"); err == nil || !strings.Contains(err.Error(), registry.EnvURL) {
		t.Errorf("New without a scheme: %v, want an error naming %s", err, registry.EnvURL)
	}
	c, _ := registry.New("")
	if c.BaseURL != registry.DefaultURL {
		t.Errorf("default base %q, want %q", c.BaseURL, registry.DefaultURL)
	}
	var query url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Query()
		switch r.URL.Query().Get("tag") {
		case "broken":
			http.Error(w, "database down", http.StatusInternalServerError)
		case "nohash":
			_, _ = w.Write([]byte(`{"http": "http://x/y"}`))
		}
	}))
	defer srv.Close()
	c, _ = registry.New(srv.URL)
	ctx := context.Background()
	if _, err := c.ByTag(ctx, "broken"); err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "database down") {
		t.Errorf("ByTag(broken): %v, want the status and the body", err)
	}
	if query.Get("count") != "false" || query.Get("tag") != "broken" {
		t.Errorf("query %v, want tag=broken&count=false", query)
	}
	if _, err := c.ByTag(ctx, "nohash"); err == nil || !strings.Contains(err.Error(), "sha3") {
		t.Errorf("ByTag(nohash): %v, want an error about sha3", err)
	}
	srv.Close()
	if _, err := c.ByTag(ctx, "x"); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("ByTag on a closed registry: %v", err)
	}
}
