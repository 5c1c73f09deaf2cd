// Command cleanimages removes the images tests built that no test run has
// used for a while (`make clean-test-images`, TEST_IMAGE_AGE): test images
// are tagged by content and stay in place after the tests, since a run from
// another checkout may be using the very same image.
//
//	cleanimages [-age 6h] [-n]
//
// -age 0 removes every test image no container uses: only when no test
// runs against this Engine (the Engine of DOCKER_HOST).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/testimage/imagegc"
)

func main() {
	age := flag.Duration("age", imagegc.StaleAfter, "remove the test images last used longer ago than this")
	dry := flag.Bool("n", false, "list what would be removed, remove nothing")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *age, *dry); err != nil {
		fmt.Fprintln(os.Stderr, "cleanimages:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, age time.Duration, dry bool) error {
	if age < 0 {
		return fmt.Errorf("-age %v: must not be negative", age)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return fmt.Errorf("docker engine client: %w", err)
	}
	defer cli.Close()
	res, err := imagegc.Collect(ctx, cli, imagegc.Options{UnusedFor: age, DryRun: dry})
	if err != nil {
		return err
	}
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	var size int64
	for _, r := range res.Removed {
		size += r.Size
		what := strings.Join(r.Refs, " ")
		if what == "" {
			what = "<untagged> " + short(r.ID)
		}
		fmt.Printf("%s %s (last used %s ago)\n", verb, what, time.Since(r.LastUsed).Round(time.Minute))
	}
	inUse := make([]string, 0, len(res.InUse))
	for id, why := range res.InUse {
		inUse = append(inUse, fmt.Sprintf("kept %s: %s", short(id), why))
	}
	sort.Strings(inUse)
	for _, l := range inUse {
		fmt.Println(l)
	}
	fmt.Printf("%s %d test images (%.1f MB) unused for %v; %d kept in use\n", verb, len(res.Removed), float64(size)/1e6, age, len(res.InUse))
	return nil
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
