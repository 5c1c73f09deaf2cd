// Package registry resolves a VM image through the Golem image registry's
// API, as the official requestor SDKs do: an image tag or hash → the image's
// sha3-224 hash and the URL providers download it from.
//
// The request and the fields read are those of golem-js
// (src/market/demand/directors/workload-demand-director.ts
// resolveTaskPackageUrl; the base URL from GOLEM_REGISTRY_URL, default
// https://registry.golem.network, src/shared/utils/env.ts getRepoUrl) and of
// yapapi (yapapi/payload/package.py resolve_package_url, yapapi/payload/vm.py
// repo): GET <base>/v1/image/info with tag=<tag> or hash=<hash>, answered by
// a JSON object whose sha3 is the image's hash and whose http and https are
// its download URLs (yapapi also reads size). Any status but 200 is a
// failure, reported with the answer's body. Both SDKs send count=true (or
// dev=true in their dev mode) to count a download; gcompose resolves at
// every plan, which downloads nothing, so it sends count=false.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DefaultURL is the registry the SDKs use when GOLEM_REGISTRY_URL is unset.
const DefaultURL = "https://registry.golem.network"

// EnvURL names the environment variable that overrides DefaultURL (golem-js
// getRepoUrl).
const EnvURL = "GOLEM_REGISTRY_URL"

// Image is the registry's answer for one image (the fields the SDKs read).
type Image struct {
	SHA3  string `json:"sha3"`
	HTTP  string `json:"http"`
	HTTPS string `json:"https"`
	Size  int64  `json:"size"`
}

// URL is the download URL a demand carries: https or http, as the SDKs'
// useHttps / image_use_https pick it (both default to http).
func (i Image) URL(https bool) string {
	if https {
		return i.HTTPS
	}
	return i.HTTP
}

// TaskPackage is the demand's golem.srv.comp.task_package for the image.
func (i Image) TaskPackage(https bool) string {
	return "hash:sha3:" + i.SHA3 + ":" + i.URL(https)
}

var sha3Hex = regexp.MustCompile(`^[0-9a-f]{56}$`)

// ValidHash says whether h is a sha3-224 hash in hex (56 lowercase digits).
func ValidHash(h string) bool { return sha3Hex.MatchString(h) }

// Client asks one registry; it caches every answer for its lifetime (a tag
// asked twice in one process is asked once).
type Client struct {
	// BaseURL is the registry's base URL, without a trailing slash.
	BaseURL string
	HTTP    *http.Client

	mu    sync.Mutex
	cache map[string]Image
}

// New is a client of the registry at base (DefaultURL when empty).
func New(base string) (*Client, error) {
	base = strings.TrimRight(strings.TrimSpace(base), "/")
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want an http(s) URL with a host", EnvURL, base)
	}
	return &Client{BaseURL: base, HTTP: &http.Client{Timeout: 30 * time.Second}, cache: map[string]Image{}}, nil
}

// FromEnv is New of GOLEM_REGISTRY_URL read through getenv.
func FromEnv(getenv func(string) string) (*Client, error) { return New(getenv(EnvURL)) }

// NotFoundError is the registry's 404: it knows no image by that tag or hash.
type NotFoundError struct {
	Registry, Kind, Key, Body string
}

func (e *NotFoundError) Error() string {
	s := fmt.Sprintf("image registry %s knows no image with %s %q (404)", e.Registry, e.Kind, e.Key)
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// IsNotFound says whether err is the registry's 404.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// ByTag resolves an image tag (e.g. golem/alpine:latest).
func (c *Client) ByTag(ctx context.Context, tag string) (Image, error) {
	if tag == "" {
		return Image{}, errors.New("an empty image tag")
	}
	return c.info(ctx, "tag", tag)
}

// ByHash resolves an image's sha3-224 hash (hex, an optional "sha3:"
// prefix) to its download URLs.
func (c *Client) ByHash(ctx context.Context, hash string) (Image, error) {
	h := strings.ToLower(strings.TrimPrefix(hash, "sha3:"))
	if !ValidHash(h) {
		return Image{}, fmt.Errorf("image hash %q: want a sha3-224 hash, 56 hex digits", hash)
	}
	img, err := c.info(ctx, "hash", h)
	if err == nil && img.SHA3 != h {
		return Image{}, fmt.Errorf("image registry %s answered hash %s for image hash %s", c.BaseURL, img.SHA3, h)
	}
	return img, err
}

func (c *Client) info(ctx context.Context, kind, key string) (Image, error) {
	ck := kind + "=" + key
	c.mu.Lock()
	img, ok := c.cache[ck]
	c.mu.Unlock()
	if ok {
		return img, nil
	}
	q := url.Values{kind: {key}, "count": {"false"}}
	u := c.BaseURL + "/v1/image/info?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Image{}, fmt.Errorf("image registry request %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Image{}, fmt.Errorf("image registry %s (%s) does not answer: %w", c.BaseURL, EnvURL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Image{}, fmt.Errorf("reading the image registry's answer to GET %s: %w", u, err)
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 300 {
		text = text[:300] + "..."
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Image{}, &NotFoundError{Registry: c.BaseURL, Kind: kind, Key: key, Body: text}
	case resp.StatusCode != http.StatusOK:
		return Image{}, fmt.Errorf("image registry %s answered %d to GET %s: %s", c.BaseURL, resp.StatusCode, u, text)
	}
	if err := json.Unmarshal(body, &img); err != nil {
		return Image{}, fmt.Errorf("image registry %s: the answer to GET %s is not an image: %w", c.BaseURL, u, err)
	}
	img.SHA3 = strings.ToLower(img.SHA3)
	if !ValidHash(img.SHA3) {
		return Image{}, fmt.Errorf("image registry %s: the answer to GET %s has sha3 %q, not a sha3-224 hash", c.BaseURL, u, img.SHA3)
	}
	if img.HTTP == "" && img.HTTPS == "" {
		return Image{}, fmt.Errorf("image registry %s: the answer to GET %s has no download URL (http, https)", c.BaseURL, u)
	}
	c.mu.Lock()
	c.cache[ck] = img
	c.mu.Unlock()
	return img, nil
}
