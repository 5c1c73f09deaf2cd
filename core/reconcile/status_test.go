package reconcile

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
)

// TestHandlerServesNoSecret: a repair fails with an error quoting a
// secret; /healthz and /metrics, fetched over HTTP (gzip accepted, as a
// Prometheus scraper does), show it masked as the CLI's output does, in
// none of the forms it takes in JSON.
func TestHandlerServesNoSecret(t *testing.T) {
	const token = `s3cr3t-<&>"-token`
	red := secret.NewRedactor()
	red.Add(token)
	// The app's name as a secret stands for any secret a label value
	// would show: /metrics goes through the redactor too.
	red.Add("shop")
	b := newBed(t, state.NewMemoryStore())
	b.w.failCreates, b.w.failWith = 1, `config "password": `+token+` breaks ^[a-z]+$`
	r := b.reconciler(Config{Redactor: red})
	b.w.kill(t, "resources.db")
	ctx := context.Background()
	if res := r.Cycle(ctx, ctx); res.Outcome != Failed || !strings.Contains(res.Err.Error(), token) {
		t.Fatalf("cycle: %+v; want it failed quoting the secret", res)
	}
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	for _, tc := range []struct {
		path, want string
	}{
		{"/healthz", `"last_error":"2 resource(s) failed:\n  resources.db: action create: config \"password\": (sensitive) breaks ^[a-z]+$`},
		{"/metrics", `gcompose_reconcile_failures_total{app="(sensitive)",stage="repair"} 1`},
	} {
		t.Run(tc.path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Set by hand, the client does not decompress: what comes is
			// what was served.
			req.Header.Set("Accept-Encoding", "gzip")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			text := string(body)
			if res.Header.Get("Content-Encoding") != "" {
				t.Fatalf("served %s-encoded: the redactor cannot read it", res.Header.Get("Content-Encoding"))
			}
			if !strings.Contains(text, tc.want) {
				t.Errorf("%s lacks %s:\n%s", tc.path, tc.want, text)
			}
			for _, secretText := range []string{token, "shop"} {
				for _, form := range secret.Forms(secretText) {
					if strings.Contains(text, form) {
						t.Errorf("%s shows %q as %q:\n%s", tc.path, secretText, form, text)
					}
				}
			}
			if tc.path == "/healthz" && !json.Valid(body) {
				t.Errorf("/healthz is not JSON:\n%s", text)
			}
		})
	}
}

// TestHealthzKeepsTextAsTyped: /healthz writes an error as the CLI's JSON
// outputs do, not HTML-escaped.
func TestHealthzKeepsTextAsTyped(t *testing.T) {
	b := newBed(t, state.NewMemoryStore())
	b.w.failCreates, b.w.failWith = 1, `exit 1 > 0 & <failed>`
	r := b.reconciler(Config{})
	b.w.kill(t, "resources.db")
	ctx := context.Background()
	if res := r.Cycle(ctx, ctx); res.Outcome != Failed {
		t.Fatalf("cycle: %+v", res)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	got := rec.Body.String()
	if !strings.Contains(got, `exit 1 > 0 & <failed>`) || strings.Contains(got, `\u00`) {
		t.Fatalf("/healthz does not keep the error as typed:\n%s", got)
	}
}
