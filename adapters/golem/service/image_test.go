package service

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/registry"
)

const (
	hashA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	hashB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// noRegistry fails the test if the registry is asked.
func noRegistry(t *testing.T) func() (*registry.Client, error) {
	return func() (*registry.Client, error) {
		t.Helper()
		t.Error("the registry was asked")
		return registry.New("http://127.0.0.1:9")
	}
}

func vmConfig(params map[string]any) Config {
	return Config{Payload: Payload{Name: "web", Runtime: "vm", Params: params}}
}

// The image params are checked before anything is asked, by yapapi's rules.
func TestImageParams(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params map[string]any
		want   string // in the error; "" for none
	}{
		{"hash", map[string]any{"image_hash": "sha3:" + hashA}, ""},
		{"tag", map[string]any{"image_tag": "golem/alpine:latest"}, ""},
		{"url", map[string]any{"image_hash": hashA, "image_url": "http://x/y.gvmi"}, ""},
		{"none", map[string]any{}, "params.image_hash or params.image_tag is required"},
		{"tag and hash", map[string]any{"image_tag": "a:b", "image_hash": hashA}, "give one"},
		{"tag and url", map[string]any{"image_tag": "a:b", "image_url": "http://x/y.gvmi"}, "image_url with image_hash"},
		{"url alone", map[string]any{"image_url": "http://x/y.gvmi"}, "params.image_hash or params.image_tag is required"},
		{"short hash", map[string]any{"image_hash": "31f8"}, `params.image_hash "31f8": want a sha3-224 hash`},
		{"https", map[string]any{"image_tag": "a:b", "image_use_https": "yes"}, "params.image_use_https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := vmConfig(tc.params)
			_, err := c.imageParams()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("imageParams(%v) = %v, want %q", tc.params, err, tc.want)
			}
		})
	}
}

// ResolveImage asks the registry as the SDKs do, takes an earlier
// resolution of the same hash without asking, and asks again for a tag
// unless the caller takes the plan's.
func TestResolveImage(t *testing.T) {
	var asked []string
	tags := map[string]string{"web:v1": hashA}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		asked = append(asked, r.URL.Path+"?"+r.URL.RawQuery)
		h := q.Get("hash")
		if tag := q.Get("tag"); tag != "" {
			h = tags[tag]
		}
		if h == "" {
			http.Error(w, `{"message":"image not found"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"sha3":"` + h + `","http":"http://dl/` + h + `","https":"https://dl/` + h + `","size":1}`))
	}))
	defer srv.Close()
	// A fresh client each time: the process cache is not what is tested.
	reg := func() (*registry.Client, error) { return registry.New(srv.URL) }
	ctx := context.Background()

	c := vmConfig(map[string]any{"image_tag": "web:v1"})
	if err := c.ResolveImage(ctx, reg, nil, false); err != nil {
		t.Fatal(err)
	}
	if tp, _ := c.TaskPackage(); tp != "hash:sha3:"+hashA+":http://dl/"+hashA {
		t.Errorf("task package %q", tp)
	}
	if len(asked) != 1 || asked[0] != "/v1/image/info?count=false&tag=web%3Av1" {
		t.Errorf("asked %v", asked)
	}
	known := *c.image
	// A plan asks for the tag again (it may have moved) ...
	tags["web:v1"] = hashB
	if err := c.ResolveImage(ctx, reg, &known, false); err != nil || c.image.Hash != hashB {
		t.Errorf("re-resolved tag: %+v, %v; want %s", c.image, err, hashB)
	}
	// ... the create takes the plan's.
	n := len(asked)
	if err := c.ResolveImage(ctx, reg, &known, true); err != nil || c.image.Hash != hashA || len(asked) != n {
		t.Errorf("create with the plan's image: %+v, %v, asked %d times more", c.image, err, len(asked)-n)
	}
	// A hash resolved before is not asked again.
	h := vmConfig(map[string]any{"image_hash": hashA})
	if err := h.ResolveImage(ctx, reg, &Image{Hash: hashA, URL: "http://dl/" + hashA}, false); err != nil || len(asked) != n {
		t.Errorf("known hash: %v, asked %d times more", err, len(asked)-n)
	}
	// https picks the registry's https URL.
	h = vmConfig(map[string]any{"image_hash": hashB, "image_use_https": true})
	if err := h.ResolveImage(ctx, reg, nil, false); err != nil || h.image.URL != "https://dl/"+hashB {
		t.Errorf("https: %+v, %v", h.image, err)
	}
	// An unknown tag names the tag and the registry.
	u := vmConfig(map[string]any{"image_tag": "web:nope"})
	err := u.ResolveImage(ctx, reg, nil, false)
	if err == nil || !strings.Contains(err.Error(), "params.image_tag web:nope") || !strings.Contains(err.Error(), srv.URL) {
		t.Errorf("unknown tag: %v", err)
	}
	// A manifest payload names its own URLs: nothing is asked.
	m := Config{Payload: Payload{Name: "m", Runtime: ManifestRuntime}}
	if err := m.ResolveImage(ctx, noRegistry(t), nil, false); err != nil {
		t.Errorf("manifest: %v", err)
	}
}
