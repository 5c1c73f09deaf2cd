package devnet

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// LabelImageTag is the label through which a local image answers for a registry tag:
// golem.image.tag=<tag> (e.g. golem.image.tag=gcompose/devnet-web:dev).
const LabelImageTag = "golem.image.tag"

// The devnet serves the image registry's API beside yagna's, so that a descriptor that names its image
// by tag or hash resolves on the devnet as on the real network (GOLEM_REGISTRY_URL pointing at the
// devnet): the request and the answer's fields are those the SDKs send and read (golem-js
// src/market/demand/directors/workload-demand-director.ts resolveTaskPackageUrl, yapapi
// yapapi/payload/package.py resolve_package_url):
//
//	GET /v1/image/info?tag=<tag>|hash=<sha3-224 hex>[&count=...][&dev=...]
//	    200 {"sha3": <hex>, "http": <url>, "https": <url>, "size": <bytes>, "tag": <tag, when asked by tag>}
//	    404 {"message": ...} when no local image answers; 400 without exactly one of tag and hash
//	GET|HEAD /download/<sha3-224 hex>
//	    200 when a local image answers for the hash (the devnet's providers "download" it: see
//	    checkDownload), else 404
//
// Like the registry's, these need no app key. A hash maps to a local image by the image-hash rule
// (resolveImage); a tag to the image of the config's images map, else the newest local image, labelled
// golem.image.tag=<tag>, whose hash is its golem.image.hash label (or its key in the images map). The
// URLs answered are http://<the host the request was sent to>/download/<hash>, under https too: the devnet
// serves no TLS.
func (s *Server) withRegistry(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/image/info", s.imageInfo)
	mux.HandleFunc("GET /download/{hash}", s.imageDownload)
	mux.HandleFunc("HEAD /download/{hash}", s.imageDownload)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/image/info" || strings.HasPrefix(r.URL.Path, "/download/") {
			mux.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) imageInfo(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tag, hash := q.Get("tag"), strings.ToLower(strings.TrimPrefix(q.Get("hash"), "sha3:"))
	if (tag == "") == (hash == "") {
		writeError(w, http.StatusBadRequest, "give exactly one of tag and hash")
		return
	}
	var ref string
	var err error
	if tag != "" {
		ref, hash, err = s.resolveTag(r.Context(), tag)
	} else if !sha3Hex.MatchString(hash) {
		writeError(w, http.StatusBadRequest, "hash %q: want a sha3-224 hash (56 hex digits)", q.Get("hash"))
		return
	} else {
		ref, err = s.resolveImage(r.Context(), hash)
	}
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	var size int64
	if ins, err := s.docker.ImageInspect(r.Context(), ref); err == nil {
		size = ins.Size
	}
	u := "http://" + r.Host + "/download/" + hash
	body := map[string]any{"sha3": hash, "http": u, "https": u, "size": size}
	if tag != "" {
		body["tag"] = tag
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) imageDownload(w http.ResponseWriter, r *http.Request) {
	hash := strings.ToLower(r.PathValue("hash"))
	if !sha3Hex.MatchString(hash) {
		writeError(w, http.StatusNotFound, "no image %s: want a sha3-224 hash (56 hex digits)", hash)
		return
	}
	ref, err := s.resolveImage(r.Context(), hash)
	if err != nil {
		writeError(w, http.StatusNotFound, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		fmt.Fprintf(w, "devnet image %s (sha3 %s): the devnet's providers run the local image, nothing is downloaded\n", ref, hash)
	}
}

var sha3Hex = regexp.MustCompile(`^[0-9a-f]{56}$`)

// resolveTag maps a registry tag to a local image and its hash: an image of the config's images map
// labelled golem.image.tag=<tag> first (its hash is its key there), else the newest local image so
// labelled, whose hash is its golem.image.hash label.
func (s *Server) resolveTag(ctx context.Context, tag string) (ref, hash string, err error) {
	hashes := make([]string, 0, len(s.cfg.Images))
	for h := range s.cfg.Images {
		hashes = append(hashes, h)
	}
	sort.Strings(hashes)
	for _, h := range hashes {
		ins, err := s.docker.ImageInspect(ctx, s.cfg.Images[h])
		if err == nil && ins.Config != nil && ins.Config.Labels[LabelImageTag] == tag {
			return s.cfg.Images[h], h, nil
		}
	}
	imgs, err := s.docker.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", LabelImageTag+"="+tag))})
	if err != nil {
		return "", "", fmt.Errorf("listing images labelled %s=%s: %w", LabelImageTag, tag, err)
	}
	if len(imgs) == 0 {
		return "", "", fmt.Errorf("no local image for tag %s: label one with %s=%s (and %s=<sha3-224 hex>)", tag, LabelImageTag, tag, LabelImageHash)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Created > imgs[j].Created })
	h := strings.ToLower(imgs[0].Labels[LabelImageHash])
	if !sha3Hex.MatchString(h) {
		return "", "", fmt.Errorf("image %s has tag %s but no hash: label it %s=<sha3-224 hex> too", imgs[0].ID, tag, LabelImageHash)
	}
	return imgs[0].ID, h, nil
}

var downloadPath = regexp.MustCompile(`/download/([0-9a-fA-F]{56})$`)

// checkDownload is the provider's image download: a real provider downloads the task package's URL and
// refuses an image whose sha3-224 is not the hash the package names. The devnet downloads nothing; a URL
// in the form its registry answers (…/download/<hash>) stands for the image of that hash, which must be
// the package's. Other URLs are not looked at (the image-hash rule).
func checkDownload(taskPackage, hash string) error {
	m := downloadPath.FindStringSubmatch(taskPackage)
	if m == nil || strings.EqualFold(m[1], hash) {
		return nil
	}
	return fmt.Errorf("image download: the image at %s has hash %s, not %s as the task package says", strings.TrimPrefix(taskPackage, "hash:sha3:"+hash+":"), strings.ToLower(m[1]), hash)
}

// ImageInspect is the engine's image inspect, bounded as every engine call.
func (e *engine) ImageInspect(ctx context.Context, ref string) (image.InspectResponse, error) {
	return get(ctx, e, "ImageInspect", short(ref), func(ctx context.Context) (image.InspectResponse, error) {
		return e.cli.ImageInspect(ctx, ref)
	})
}
