package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gcompose/gcompose/adapters/golem/registry"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Image is a VM payload's image as resolved: what the demand's
// golem.srv.comp.task_package carries. The create records it in the
// identity, so that a later plan knows what the rental runs.
type Image struct {
	// Tag is the payload's params.image_tag, "" when it names a hash.
	Tag  string `json:"tag,omitempty"`
	Hash string `json:"hash"`
	URL  string `json:"url"`
}

// imageSpec is how a payload names its image (params image_tag,
// image_hash, image_url, image_use_https).
type imageSpec struct {
	tag, hash, url string
	https          bool
}

// imageParams reads and checks the payload's image params by the rules of
// yapapi (payload/vm.py repo, payload/package.py resolve_package_url): a
// tag or a hash, not both, to resolve through the registry; image_url
// (taken as is, not asked of the registry) needs image_hash and excludes
// image_tag (golem-js workload-demand-director.ts
// resolveTaskPackageFromCustomUrl needs the hash too).
func (c Config) imageParams() (imageSpec, error) {
	sp := imageSpec{tag: strings.TrimSpace(c.param("image_tag")), url: c.param("image_url")}
	sp.hash = strings.ToLower(strings.TrimPrefix(c.param("image_hash"), "sha3:"))
	switch v := c.Payload.Params["image_use_https"].(type) {
	case nil:
	case bool:
		sp.https = v
	case string:
		if v != "true" && v != "false" {
			return sp, fmt.Errorf("payload %s: params.image_use_https %q: want true or false", c.Payload.Name, v)
		}
		sp.https = v == "true"
	default:
		return sp, fmt.Errorf("payload %s: params.image_use_https: want true or false, got %v", c.Payload.Name, v)
	}
	switch {
	case sp.hash == "" && sp.tag == "":
		return sp, fmt.Errorf("payload %s: params.image_hash or params.image_tag is required for runtime %s", c.Payload.Name, c.Payload.Runtime)
	case sp.hash != "" && sp.tag != "":
		return sp, fmt.Errorf("payload %s: params.image_tag and params.image_hash both name the image: give one (the registry resolves either)", c.Payload.Name)
	case sp.url != "" && sp.tag != "":
		return sp, fmt.Errorf("payload %s: params.image_tag is resolved through the image registry, params.image_url bypasses it: give image_url with image_hash", c.Payload.Name)
	case sp.hash != "" && !registry.ValidHash(sp.hash):
		return sp, fmt.Errorf("payload %s: params.image_hash %q: want a sha3-224 hash, 56 hex digits", c.Payload.Name, c.param("image_hash"))
	}
	return sp, nil
}

// ResolveImage finds the payload's image: image_url with image_hash as
// given; else the registry's answer for the tag or the hash. known is an
// earlier resolution (nil if none): one of the same hash is taken again
// without asking (a hash names one image); one of the same tag only when
// reuseTag (the create takes the plan's), since the registry may point a
// tag at another image at any time: each plan asks. It is a no-op for
// payloads that are not VM images (a manifest names its own URLs).
func (c *Config) ResolveImage(ctx context.Context, reg func() (*registry.Client, error), known *Image, reuseTag bool) error {
	if c.Payload.Runtime != "vm" {
		return nil
	}
	sp, err := c.imageParams()
	if err != nil {
		return err
	}
	if sp.url != "" {
		c.image = &Image{Hash: sp.hash, URL: sp.url}
		return nil
	}
	if known != nil && known.URL != "" && registry.ValidHash(known.Hash) &&
		((sp.tag == "" && known.Tag == "" && known.Hash == sp.hash) || (sp.tag != "" && reuseTag && known.Tag == sp.tag)) {
		k := *known
		c.image = &k
		return nil
	}
	rc, err := reg()
	if err != nil {
		return fmt.Errorf("payload %s: %w", c.Payload.Name, err)
	}
	var img registry.Image
	if sp.tag != "" {
		img, err = rc.ByTag(ctx, sp.tag)
	} else {
		img, err = rc.ByHash(ctx, sp.hash)
	}
	if err != nil {
		what := "params.image_hash " + sp.hash
		if sp.tag != "" {
			what = "params.image_tag " + sp.tag
		}
		return fmt.Errorf("payload %s: %s: %w", c.Payload.Name, what, err)
	}
	u := img.URL(sp.https)
	if u == "" {
		return fmt.Errorf("payload %s: image registry %s has no %s download URL for %s", c.Payload.Name, rc.BaseURL, map[bool]string{true: "https", false: "http"}[sp.https], img.SHA3)
	}
	c.image = &Image{Tag: sp.tag, Hash: img.SHA3, URL: u}
	return nil
}

// registries are the adapter process's registry clients, one per base URL:
// each caches what it resolved for the process's lifetime.
type registries struct {
	mu sync.Mutex
	by map[string]*registry.Client
}

// client is the registry GOLEM_REGISTRY_URL of the request's environment
// names (registry.DefaultURL when unset).
func (rs *registries) client(req *sdk.Request) func() (*registry.Client, error) {
	return func() (*registry.Client, error) {
		base := ""
		if req.Gcompose != nil {
			base = req.Gcompose.Env[registry.EnvURL]
		}
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if c, ok := rs.by[base]; ok {
			return c, nil
		}
		c, err := registry.New(base)
		if err != nil {
			return nil, err
		}
		if rs.by == nil {
			rs.by = map[string]*registry.Client{}
		}
		rs.by[base] = c
		return c, nil
	}
}

// withRegistryEnv asks gcompose for GOLEM_REGISTRY_URL too.
func withRegistryEnv(ext *protocol.InitExt) *protocol.InitExt {
	if !slices.Contains(ext.Env, registry.EnvURL) {
		ext.Env = append(slices.Clone(ext.Env), registry.EnvURL)
	}
	return ext
}
