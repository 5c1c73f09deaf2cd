package adapter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			tag := testimage.Image(t, e.ctx, "./internal/testimage/testdata/sdkadapter", "gcompose/sdkadapter:test")
			dir := t.TempDir()
			tg := adapter.Target{App: e.app, Lineage: "lin-A", Name: "files.sdk", Image: tag, Config: map[string]any{"content": "one"},
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
				for i, a := range st.Actions {
					act := tg
					act.Operation = &protocol.Operation{ID: fmt.Sprintf("op-%s-%d", a.Name, i), Kind: wantChange, Action: a.Name, StartedAt: time.Now().UTC()}
					out, err := e.client.Action(e.ctx, act, a, st.StaleState, nil)
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
			// The sweep: the file a write tagged with this lineage is an
			// orphan unless a known resource names it (by identity or by its
			// pending operation); another lineage's is only ever reported.
			tg.Config = map[string]any{"content": "three"}
			converge(protocol.Present, protocol.ChangeCreate)
			sweep := func(lineage string, known []protocol.KnownResource, terminate bool) string {
				t.Helper()
				st := tg
				st.Lineage = lineage
				res, err := e.client.Sweep(e.ctx, st, protocol.SweepRequest{Known: known, Terminate: terminate})
				if err != nil {
					t.Fatal(err)
				}
				return js(res)
			}
			named := []protocol.KnownResource{{Name: "files.sdk", Identity: map[string]any{"path": "/data/files.sdk"}}}
			pending := []protocol.KnownResource{{Name: "files.sdk", Pending: &protocol.Operation{ID: "op-write-0", Kind: "create", StartedAt: time.Now()}}}
			orphan := `{"found":[{"kind":"file","id":"/data/files.sdk","lineage":"lin-A","resource":"files.sdk","action":"%s","detail":"created by operation op-write-0"}]}`
			for _, c := range []struct {
				lineage   string
				known     []protocol.KnownResource
				terminate bool
				want      string
			}{
				{"lin-A", named, true, `{"found":[]}`},
				{"lin-A", pending, true, `{"found":[]}`},
				{"lin-A", nil, false, fmt.Sprintf(orphan, "reported")},
				{"lin-B", nil, true, fmt.Sprintf(orphan, "reported")},
				{"lin-A", nil, true, fmt.Sprintf(orphan, "terminated")},
				{"lin-A", nil, true, `{"found":[]}`},
			} {
				if got := sweep(c.lineage, c.known, c.terminate); got != c.want {
					t.Fatalf("sweep %s known %s terminate %t:\n got %s\nwant %s", c.lineage, js(c.known), c.terminate, got, c.want)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "files.sdk")); !os.IsNotExist(err) {
				t.Fatalf("the terminated orphan still exists: %v", err)
			}
			want := "init,state,action write,state,state,state,action write,state,state,action delete,state,state,action write,state,sweep,sweep,sweep,sweep,sweep,sweep"
			if mode == "served" {
				want = "init,serve"
			}
			if got := strings.Join(e.count.calls(), ","); got != want {
				t.Fatalf("containers %s, want %s", got, want)
			}
		})
	}
}

// TestIdentityStreamed: an identity report reaches the caller while the
// action still runs, one-shot (stdout read as it comes) and served
// (interim lines). The action waits, after reporting, for a file that only
// the caller's ReportIdentity creates: without streaming it never ends.
func TestIdentityStreamed(t *testing.T) {
	for _, mode := range []string{"one-shot", "served"} {
		t.Run(mode, func(t *testing.T) {
			e := setup(t, func(o *adapter.Options) { o.NoServe = mode == "one-shot" })
			defer closeClient(t, e.client)
			tag := testimage.Image(t, e.ctx, "./internal/testimage/testdata/sdkadapter", "gcompose/sdkadapter:test")
			dir := t.TempDir()
			var reported []string
			tg := adapter.Target{App: e.app, Lineage: "lin-A", Name: "files.stream", Image: tag,
				Config:    map[string]any{"content": "x", "await": "release"},
				Plugs:     map[string]adapter.Plug{"data": {Path: dir}},
				Operation: &protocol.Operation{ID: "op-1", Kind: protocol.ChangeCreate, Action: "write", StartedAt: time.Now().UTC()},
				ReportIdentity: func(identity map[string]any) {
					reported = append(reported, js(identity))
					if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
						t.Error(err)
					}
				}}
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			out, err := e.client.Action(ctx, tg, protocol.ActionSpec{Name: "write", Args: []string{"action", "write"}}, nil, nil)
			if err != nil {
				t.Fatalf("%v (the identity did not arrive while the action ran)", err)
			}
			if strings.Join(reported, ",") != `{"path":"/data/files.stream"}` || out.Identity["path"] != "/data/files.stream" {
				t.Fatalf("reported %v, result %+v", reported, out)
			}
			if strings.Contains(out.Output, protocol.IdentityPrefix) {
				t.Fatalf("identity line left in the output: %q", out.Output)
			}
		})
	}
}
