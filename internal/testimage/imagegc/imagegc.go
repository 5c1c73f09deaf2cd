// Package imagegc removes the images tests built (internal/testimage) once
// no test run can still be using them. Test images are tagged by content,
// and a run from another checkout may be using any of them; so nothing is
// removed because it is old or superseded, only because it was last used
// (tagged: testimage tags an image again each time a test binary takes it
// from the cache) longer ago than any test run lasts. An image a container
// still uses stays: the Engine refuses to remove it.
package imagegc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
)

// Labels testimage puts on every image it builds.
const (
	// LabelTest marks an image (and a container) as made by a test.
	LabelTest = "gcompose.test"
	// LabelName is the name a test asked for ("gcompose-test/file-adapter:e2e"),
	// to which the content hash is added to make the image's tag.
	LabelName = "gcompose.test.name"
	// LabelContent is the SHA-256 of what the image was built from.
	LabelContent = "gcompose.test.content-sha256"
)

// LegacyRepository is the repository prefix of test images tagged before
// tags carried content hashes (some without LabelTest); they are collected
// too.
const LegacyRepository = "gcompose-test/"

// StaleAfter is how long ago an image must have last been used to be
// removed by default: longer than any test run lasts (the longest timeout
// in the Makefile is interrupt-sweep's 240m).
const StaleAfter = 6 * time.Hour

// Options say which images Collect may remove.
type Options struct {
	// UnusedFor: an image used (tagged) more recently stays.
	UnusedFor time.Duration
	// Name, when set, limits Collect to the images built for that name
	// (LabelName); otherwise every test image and every legacy one is seen.
	Name string
	// Keep is an image ID that stays whatever its age (the one just built).
	Keep string
	// RequireUseTime keeps the images for which the Engine records no last
	// tag time (Podman's API, the containerd image store) instead of
	// dating them by their creation: a test run cannot tell how recently
	// another one took such an image from the cache.
	RequireUseTime bool
	// DryRun lists what would go without removing it.
	DryRun bool
}

// Removal is one image Collect removed (or would, with DryRun).
type Removal struct {
	ID string
	// Refs are the tags removed; none for an untagged image.
	Refs []string
	// LastUsed is the last tag time, or the creation time when the Engine
	// records none.
	LastUsed time.Time
	Size     int64
}

// Result is what Collect did.
type Result struct {
	Removed []Removal
	// InUse are images old enough to go that the Engine would not remove
	// (a container or a child image uses them), with its reason.
	InUse map[string]string
}

// Collect removes the test images last used longer ago than
// opts.UnusedFor. Failing to list is an error; an image another process
// removes at the same time is skipped, and one the Engine refuses to remove
// is reported in InUse.
func Collect(ctx context.Context, cli client.APIClient, opts Options) (Result, error) {
	res := Result{InUse: map[string]string{}}
	ids, err := candidates(ctx, cli, opts.Name)
	if err != nil {
		return res, err
	}
	now := time.Now()
	for _, id := range ids {
		if id == opts.Keep {
			continue
		}
		ins, err := cli.ImageInspect(ctx, id)
		if cerrdefs.IsNotFound(err) {
			continue
		} else if err != nil {
			return res, fmt.Errorf("inspect test image %s: %w", short(id), err)
		}
		used := ins.Metadata.LastTagTime
		if used.IsZero() {
			if opts.RequireUseTime {
				continue
			}
			if used, err = time.Parse(time.RFC3339Nano, ins.Created); err != nil {
				continue // undatable: not ours to judge
			}
		}
		if now.Sub(used) < opts.UnusedFor {
			continue
		}
		r := Removal{ID: ins.ID, Refs: ins.RepoTags, LastUsed: used, Size: ins.Size}
		if opts.DryRun {
			res.Removed = append(res.Removed, r)
			continue
		}
		if err := remove(ctx, cli, ins.ID, ins.RepoTags); err != nil {
			if cerrdefs.IsNotFound(err) {
				continue
			}
			res.InUse[ins.ID] = err.Error()
			continue
		}
		res.Removed = append(res.Removed, r)
	}
	return res, nil
}

// candidates lists the IDs of the test images (of one name, when name is
// set), oldest first.
func candidates(ctx context.Context, cli client.APIClient, name string) ([]string, error) {
	lists := [][2]string{{"label", LabelTest}, {"reference", LegacyRepository + "*"}}
	if name != "" {
		lists = [][2]string{{"label", LabelName + "=" + name}}
	}
	created := map[string]int64{}
	for _, f := range lists {
		imgs, err := cli.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg(f[0], f[1]))})
		if err != nil {
			return nil, fmt.Errorf("list the images of %s=%s: %w", f[0], f[1], err)
		}
		for _, img := range imgs {
			created[img.ID] = img.Created
		}
	}
	ids := make([]string, 0, len(created))
	for id := range created {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if created[ids[i]] != created[ids[j]] {
			return created[ids[i]] < created[ids[j]]
		}
		return ids[i] < ids[j]
	})
	return ids, nil
}

// remove untags each ref (the last one deletes the image) or, for an
// untagged image, deletes it by ID; never by force, so that an image a
// container uses stays.
func remove(ctx context.Context, cli client.APIClient, id string, refs []string) error {
	if len(refs) == 0 {
		_, err := cli.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true})
		return err
	}
	var errs []error
	for _, ref := range refs {
		if _, err := cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", ref, err))
		}
	}
	return errors.Join(errs...)
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
