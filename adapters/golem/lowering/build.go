package lowering

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/adapters/golem/payloadbuild"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/core/descriptor"
)

// BuildPayloads builds the images of the payloads that name a build context (build:), before anything
// is planned: every plan resolves a payload's image hash through the registry, and the devnet's registry
// answers from the local images of its engine. The hash is the context's (adapters/golem/payloadbuild),
// so an unchanged source is not built again. Only the devnet runs such an image; on another yagna,
// build: is refused with what to do instead. info reports each image built.
// The CLI calls it before planning; it lives here, beside the lowering that
// turns build: into the image hash, as Golem knowledge.
func BuildPayloads(ctx context.Context, app *descriptor.App, info func(string)) error {
	var names []string
	for _, name := range slices.Sorted(maps.Keys(app.Payloads)) {
		if app.Payloads[name].BuildDir != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	first := app.Payloads[names[0]]
	where := fmt.Sprintf("payload %s: build: %s (%s)", first.Name, first.Build, app.Pos("/payloads/"+first.Name+"/build"))
	apiURL := strings.TrimSpace(os.Getenv("YAGNA_API_URL"))
	if apiURL == "" {
		apiURL = yagna.DefaultURL
	}
	key := os.Getenv("YAGNA_APPKEY")
	if key == "" {
		return fmt.Errorf("%s: YAGNA_APPKEY is not set: the image is built for the devnet only, and gcompose asks yagna whether it is one", where)
	}
	askCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	devnetEngine, err := payloadbuild.Devnet(askCtx, &http.Client{}, apiURL, key)
	if errors.Is(err, payloadbuild.ErrNotDevnet) {
		return fmt.Errorf("%s: yagna at %s is not the gcompose devnet, and only the devnet runs an image built here: "+
			"a Golem provider downloads its image from the image registry. Build the image, convert and push it "+
			"(gvmkit-build <image> --push), then name it with params.image_tag (or params.image_hash) instead of build: (docs/golem.md, \"A payload built from source\")", where, apiURL)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("%s: the Docker engine: %w", where, err)
	}
	defer cli.Close()
	ours, err := cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("%s: asking the Docker engine who it is: %w", where, err)
	}
	if ours.ID != devnetEngine {
		return fmt.Errorf("%s: the devnet at %s runs the images of Docker engine %s, and DOCKER_HOST names engine %s: "+
			"point DOCKER_HOST at the devnet's engine, where the image must be built", where, apiURL, devnetEngine, ours.ID)
	}
	for _, name := range names {
		pl := app.Payloads[name]
		res, err := payloadbuild.Ensure(ctx, cli, name, pl.BuildDir)
		if err != nil {
			return fmt.Errorf("payload %s: build: %s (%s): %w", name, pl.Build, app.Pos("/payloads/"+name+"/build"), err)
		}
		if res.Built {
			info(fmt.Sprintf("payload %s: built image %s from %s (hash %s)", name, res.Ref, pl.Build, res.Hash))
		}
	}
	return nil
}
