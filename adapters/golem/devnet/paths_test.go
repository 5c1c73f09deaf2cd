package devnet_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// TestUncleanPathsAreNotFound: a path with an empty segment (an id left
// empty by a script) is answered 404, as yagna answers it, not redirected to
// the cleaned path as Go's ServeMux would: the tutorial's kill of an empty
// activity id got a 307, which curl -f took for success, and the drift step
// found nothing drifted.
func TestUncleanPathsAreNotFound(t *testing.T) {
	e := start(t, devnet.Config{})
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ method, path string }{
		{"POST", devnet.AdminPrefix + "/activities//kill"},
		{"GET", "/activity-api/v1/activity//state"},
		{"DELETE", "/net-api/v1/net//"},
		{"GET", "/market-api/v1/../../me"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, e.url+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Opaque = tc.path // sent as written, not cleaned by the client
			req.Header.Set("Authorization", "Bearer "+testKey)
			resp, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != http.StatusNotFound || body["message"] == nil {
				t.Errorf("status %d (%v), want 404 with a message", resp.StatusCode, body)
			}
		})
	}
	// A clean path is served as before.
	if status, body := e.raw("GET", "/me", testKey, nil); status != http.StatusOK {
		t.Errorf("GET /me: %d %s", status, body)
	}
}
