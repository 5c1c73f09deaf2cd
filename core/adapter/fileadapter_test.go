package adapter_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// TestFileAdapter drives the repo's file adapter (cmd/file-adapter) through
// create, no-op and destroy, one container per call and served.
func TestFileAdapter(t *testing.T) {
	for _, mode := range []string{"one-shot", "served"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, func(o *adapter.Options) { o.NoServe = mode == "one-shot" })
			defer closeClient(t, e.client)
			tag := testimage.Image(t, e.ctx, "./cmd/file-adapter", "gcompose/file-adapter:test")
			dir := t.TempDir()
			tg := adapter.Target{App: e.app, Name: "files.hello", Image: tag,
				Config: map[string]any{"path": "sub/hello.txt", "content": "hello\n"},
				Plugs:  map[string]adapter.Plug{"files": {Path: dir}}}
			apply := func(desired string) int {
				t.Helper()
				n := 0
				for i := 0; i < 3; i++ {
					st, err := e.client.State(e.ctx, tg, desired, nil)
					if err != nil {
						t.Fatal(err)
					}
					if st.Status == protocol.Valid {
						return n
					}
					for _, a := range st.Actions {
						if _, err := e.client.Action(e.ctx, tg, a, st.StaleState, nil); err != nil {
							t.Fatal(err)
						}
						n++
					}
				}
				t.Fatal("not VALID after two rounds of actions")
				return n
			}
			if n := apply(protocol.Present); n == 0 {
				t.Fatal("create ran no action")
			}
			if got, err := os.ReadFile(filepath.Join(dir, "sub/hello.txt")); err != nil || string(got) != "hello\n" {
				t.Fatalf("file: %q %v", got, err)
			}
			if n := apply(protocol.Present); n != 0 {
				t.Fatalf("second deploy ran %d actions", n)
			}
			apply(protocol.Absent)
			if _, err := os.Stat(filepath.Join(dir, "sub/hello.txt")); !os.IsNotExist(err) {
				t.Fatalf("not deleted: %v", err)
			}
			tg.Config = map[string]any{"path": "../escape"}
			if _, err := e.client.State(e.ctx, tg, protocol.Present, nil); err == nil || !strings.Contains(err.Error(), "files.hello: config invalid at /path") {
				t.Fatalf("bad path: %v", err)
			}
		})
	}
}
