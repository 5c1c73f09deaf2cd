// Package payloadbuild builds the image of a payload that names a build context (build: ./counter) for
// the gcompose devnet, and names it by the hash of that context.
//
// Where the build runs, and why: the plan must know a changed image before anything is rebuilt, so the
// image's name is the hash of its build context, computed from the files alone (Hash: a tar of the
// context in name order with fixed times and owners, hashed with SHA3-224, the hash form a Golem image
// hash has). The lowering puts it in the payload as params.image_hash; a changed source is a changed
// hash, which the plan shows as a rebuild of the services of that payload, and of no other. The image
// itself is built through the Engine API (Ensure) before the plan, because every plan resolves the
// image's hash through the registry, and the devnet's registry answers from its engine's local images:
// an image already built from the same context (labelled with its hash) is not built again.
//
// Only the devnet can run what was built here: it says so at GET /devnet/v1/info (Devnet), with the ID of
// the Docker engine whose images it runs. A real yagna's providers download images from the Golem
// registry, so on it build: is refused with what to do instead.
package payloadbuild

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha3"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/dockerbuild"
)

// Labels of a built image. HashLabel is the one the devnet finds a payload's image by
// (adapters/golem/devnet, LabelImageHash).
const (
	HashLabel    = "golem.image.hash"
	PayloadLabel = "gcompose.build.payload"
	ContextLabel = "gcompose.build.context"
	// Repository is where built images are tagged: gcompose-build/<payload>:<hash[:16]>.
	Repository = "gcompose-build"
)

// devnetKind is what the devnet answers as its kind at GET /devnet/v1/info (devnet.InfoKind).
const devnetKind = "gcompose-devnet"

// Context is the build context of dir as a tar: its files and folders in name order, each with mode
// 0644 or 0755 (executable or not), time zero and owner root, symbolic links as links; so that the same
// files give the same bytes on any machine and checkout (git does not keep times or owners). Nothing is
// left out (there is no .dockerignore): keep the folder to what the image needs.
func Context(dir string) (*bytes.Buffer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		mode := int64(0o644)
		if info.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		switch {
		case info.IsDir():
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, target, 0o777
		case info.Mode().IsRegular():
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, mode, info.Size()
		default:
			return fmt.Errorf("%s: neither a file, a folder nor a link (%s)", path, info.Mode().Type())
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if n, err := io.Copy(tw, f); err != nil {
			return err
		} else if n != h.Size {
			return fmt.Errorf("%s changed while it was read", path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("build context %s: %w", dir, err)
	}
	return &b, nil
}

// HashOf is the image hash of a build context's tar: SHA3-224, 56 hex digits, as a Golem image hash.
func HashOf(tarball []byte) string {
	sum := sha3.Sum224(tarball)
	return hex.EncodeToString(sum[:])
}

// Hash is the image hash of the build context in dir.
func Hash(dir string) (string, error) {
	b, err := Context(dir)
	if err != nil {
		return "", err
	}
	return HashOf(b.Bytes()), nil
}

// Result is what Ensure did for one payload.
type Result struct {
	Hash string
	// Ref is the built image's tag, or the image found with the hash.
	Ref string
	// Built is false when an image of that hash was there already.
	Built bool
}

// Ensure makes sure the engine has an image of payload's build context in dir, labelled with the
// context's hash (HashLabel): it builds one when none is there.
func Ensure(ctx context.Context, cli *client.Client, payload, dir string) (Result, error) {
	tarball, err := Context(dir)
	if err != nil {
		return Result{}, err
	}
	hash := HashOf(tarball.Bytes())
	imgs, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", HashLabel+"="+hash))})
	if err != nil {
		return Result{}, fmt.Errorf("looking for the image of payload %s (hash %s): %w", payload, hash, err)
	}
	if len(imgs) > 0 {
		ref := imgs[0].ID
		if len(imgs[0].RepoTags) > 0 {
			ref = imgs[0].RepoTags[0]
		}
		return Result{Hash: hash, Ref: ref}, nil
	}
	ref := Repository + "/" + payload + ":" + hash[:16]
	err = dockerbuild.BuildContext(ctx, cli, tarball, build.ImageBuildOptions{
		Tags:        []string{ref},
		Labels:      map[string]string{HashLabel: hash, PayloadLabel: payload, ContextLabel: dir},
		Remove:      true,
		ForceRemove: true,
	})
	if err != nil {
		return Result{}, fmt.Errorf("building the image of payload %s from %s: %w", payload, dir, err)
	}
	return Result{Hash: hash, Ref: ref, Built: true}, nil
}

// ErrNotDevnet is returned by Devnet for a yagna that is not the gcompose devnet.
var ErrNotDevnet = errors.New("not the gcompose devnet")

// Devnet asks the yagna at apiURL whether it is the gcompose devnet (GET /devnet/v1/info, with the app
// key), and returns the ID of the Docker engine whose images it runs. A yagna that answers 404 there is
// not the devnet (ErrNotDevnet); one that does not answer is an error. /devnet/v1/info is the devnet's own
// path, not a yagna one: yagna serves its API with actix-web and no route there (core/serv/src/main.rs, as
// the devnet's exactPaths notes), so a real yagna answers a valid key's request for it with actix's 404, and
// a wrong key with its auth middleware's 401, which is an error here, not "not the devnet".
func Devnet(ctx context.Context, hc *http.Client, apiURL, appKey string) (string, error) {
	url := strings.TrimRight(apiURL, "/") + "/devnet/v1/info"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("asking %s whether it is the devnet: %w", apiURL, err)
	}
	req.Header.Set("Authorization", "Bearer "+appKey)
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("asking yagna at %s whether it is the devnet: %w", apiURL, redact(err, appKey))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusNotFound {
		return "", ErrNotDevnet
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("asking yagna at %s whether it is the devnet: GET /devnet/v1/info answered %s: %s", apiURL, resp.Status, strings.TrimSpace(string(body)))
	}
	var in struct {
		Kind     string `json:"kind"`
		EngineID string `json:"engine_id"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Kind != devnetKind {
		return "", ErrNotDevnet
	}
	return in.EngineID, nil
}

// redact removes the app key from an error's text (a URL error never carries a header, but a proxy's
// message might echo one).
func redact(err error, key string) error {
	if key == "" || !strings.Contains(err.Error(), key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), key, "<YAGNA_APPKEY>"))
}
