package enginetest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/docker/docker/client"
)

// Proxy is an engine in front of the real one (upstream: a DOCKER_HOST, ""
// for the environment's): every request goes through to it unless
// intercept, called first with the request's path without its /v1.xx
// prefix, answers it itself (true). intercept gets forward, which passes a
// request to the real engine and writes its answer, so that it can act
// before and after. For tests of what a client does when a call's answer
// is lost or an engine answers otherwise than usual, on real containers.
func Proxy(t testing.TB, upstream string, intercept func(w http.ResponseWriter, r *http.Request, path string, forward http.Handler) bool) *Engine {
	t.Helper()
	if upstream == "" {
		upstream = os.Getenv("DOCKER_HOST")
	}
	if upstream == "" {
		upstream = client.DefaultDockerHost
	}
	u, err := client.ParseHostURL(upstream)
	if err != nil || u.Scheme != "unix" {
		t.Fatalf("enginetest.Proxy: upstream %q is not a unix socket (%v)", upstream, err)
	}
	sock := u.Host
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "docker"})
			pr.Out.Host = "docker"
		},
		Transport: tr,
	}
	ln, path := socket(t)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.HasPrefix(p, "/v1.") {
			if i := strings.Index(p[1:], "/"); i > 0 {
				p = p[i+1:]
			}
		}
		if intercept != nil && intercept(w, r, p, rp) {
			return
		}
		rp.ServeHTTP(w, r)
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("engine proxy: %v", err)
		}
	}()
	e := &Engine{Host: "unix://" + path, close: func() {
		srv.Close()
		<-done
		tr.CloseIdleConnections()
	}}
	t.Cleanup(e.Close)
	return e
}
