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

// TestSDKAdapter drives an adapter written with protocol/sdk through a full
// create / no-op / update / destroy cycle, one container per call and served.
func TestSDKAdapter(t *testing.T) {
	for _, mode := range []string{"one-shot", "served"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, func(o *adapter.Options) { o.NoServe = mode == "one-shot" })
			defer closeClient(t, e.client)
			const tag = "gcompose/sdkadapter:test"
			testimage.Build(t, e.ctx, "./internal/testimage/testdata/sdkadapter", tag)
			dir := t.TempDir()
			tg := adapter.Target{App: e.app, Name: "files.sdk", Image: tag, Config: map[string]any{"content": "one"},
				Plugs: map[string]adapter.Plug{"data": {Path: dir}}}

			converge := func(desired string, wantChange string) {
				t.Helper()
				st, err := e.client.State(e.ctx, tg, desired, nil)
				if err != nil {
					t.Fatal(err)
				}
				if wantChange == "" {
					if st.Status != protocol.Valid {
						t.Fatalf("want VALID, got %+v", st)
					}
					return
				}
				if st.Status != protocol.Stale || st.Gcompose == nil || st.Gcompose.Change != wantChange {
					t.Fatalf("want STALE (%s), got %+v", wantChange, st)
				}
				for _, a := range st.Actions {
					out, err := e.client.Action(e.ctx, tg, a, st.StaleState, nil)
					if err != nil {
						t.Fatal(err)
					}
					if a.Name == "write" && (out.Identity["path"] != "/data/files.sdk" || !strings.Contains(out.Output, "wrote /data/files.sdk")) {
						t.Fatalf("write action: %+v", out)
					}
				}
				st, err = e.client.State(e.ctx, tg, desired, nil)
				if err != nil || st.Status != protocol.Valid {
					t.Fatalf("after actions: %+v %v", st, err)
				}
			}
			converge(protocol.Present, protocol.ChangeCreate)
			converge(protocol.Present, "")
			tg.Config = map[string]any{"content": "two"}
			converge(protocol.Present, protocol.ChangeUpdate)
			if got, _ := os.ReadFile(filepath.Join(dir, "files.sdk")); string(got) != "two" {
				t.Fatalf("file %q", got)
			}
			converge(protocol.Absent, protocol.ChangeDelete)
			if _, err := os.Stat(filepath.Join(dir, "files.sdk")); !os.IsNotExist(err) {
				t.Fatalf("not deleted: %v", err)
			}
			// A config the adapter's schema refuses never reaches it.
			tg.Config = map[string]any{}
			if _, err := e.client.State(e.ctx, tg, protocol.Present, nil); err == nil || !strings.Contains(err.Error(), `files.sdk: config invalid at (root): missing property "content"`) {
				t.Fatalf("config error: %v", err)
			}
			want := "init,state,action write,state,state,state,action write,state,state,action delete,state"
			if mode == "served" {
				want = "init,serve"
			}
			if got := strings.Join(e.count.calls(), ","); got != want {
				t.Fatalf("containers %s, want %s", got, want)
			}
		})
	}
}
