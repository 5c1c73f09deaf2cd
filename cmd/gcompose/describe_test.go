package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// validate counts the edges gcompose graph draws, the resources a deploy
// adds included: it said 3 edges of examples/webapp where graph drew 7.
func TestValidateCountsWhatGraphDraws(t *testing.T) {
	edges := regexp.MustCompile(`, (\d+) edges?$`)
	for file, want := range map[string]string{
		"../../examples/webapp/webapp.yaml":  "webapp: valid: 2 services, 1 network, 2 implicit resources, 7 edges",
		"../../examples/files/gcompose.yaml": "files-demo: valid: 0 services, 0 networks, 3 resources, 2 edges",
	} {
		f, err := filepath.Abs(file)
		if err != nil {
			t.Fatal(err)
		}
		v := gcPlain("validate", f)
		got := strings.TrimSpace(v.stdout)
		if v.code != 0 || got != want {
			t.Errorf("validate %s: exit %d, %q, want %q\n%s", file, v.code, got, want, v.stderr)
			continue
		}
		g := gcPlain("graph", f)
		if g.code != 0 {
			t.Fatalf("graph %s: exit %d\n%s", file, g.code, g.stderr)
		}
		if m := edges.FindStringSubmatch(got); m == nil || m[1] != strconv.Itoa(strings.Count(g.stdout, " -> ")) {
			t.Errorf("validate %s says %q; graph draws %d edges:\n%s", file, got, strings.Count(g.stdout, " -> "), g.stdout)
		}
	}
}
