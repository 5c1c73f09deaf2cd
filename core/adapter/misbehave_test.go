package adapter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/internal/testimage"
	"github.com/gcompose/gcompose/protocol"
)

// misbehaveName names the misbehave adapter image; testimage adds the
// content's hash to its tag.
const misbehaveName = "gcompose/misbehave-adapter:test"

// TestMisbehaveAdapter runs the repo's misbehaving adapter
// (cmd/misbehave-adapter) through every error path of the client.
func TestMisbehaveAdapter(t *testing.T) {
	e := setup(t, nil)
	misbehaveImage := testimage.Image(t, e.ctx, "./cmd/misbehave-adapter", misbehaveName)
	variant := func(mode string) string {
		return testimage.DerivedImage(t, e.ctx, "FROM "+misbehaveImage+"\nENV GCOMPOSE_MISBEHAVE_INIT="+mode+"\n", "gcompose/misbehave-adapter:init-"+mode)
	}
	newClient := func() *adapter.Client {
		c, err := adapter.New(adapter.Options{Runner: e.runner, Timeout: 10 * time.Second, InitTimeout: 10 * time.Second, StdoutLimit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	cases := []struct {
		name   string
		image  string
		config map[string]any
		action bool // misbehaves in the action
		want   []string
	}{
		{"state hang", misbehaveImage, map[string]any{"mode": "hang"}, false, []string{"call state for db timed out after 10s"}},
		{"state garbage", misbehaveImage, map[string]any{"mode": "garbage"}, false, []string{"db: state call: answer is not JSON"}},
		{"state wrong schema", misbehaveImage, map[string]any{"mode": "wrong-schema"}, false, []string{"db: state call: answer invalid at (root): missing property \"state\"", `property "colour" not allowed`}},
		{"state exit", misbehaveImage, map[string]any{"mode": "exit-nonzero", "message": "no backend"}, false, []string{"call state for db failed: exit code 3", "no backend"}},
		{"state huge", misbehaveImage, map[string]any{"mode": "huge-output", "bytes": 4 << 20}, false, []string{"call state for db refused: it wrote more than 1048576 bytes"}},
		{"config", misbehaveImage, map[string]any{"mode": "sulking"}, false, []string{"db: config invalid at /mode: must be one of"}},
		{"action hang", misbehaveImage, map[string]any{"mode": "hang", "on": "action"}, true, []string{"call action misbehave for db timed out after 10s"}},
		{"action exit", misbehaveImage, map[string]any{"mode": "exit-nonzero", "on": "action"}, true, []string{"call action misbehave for db failed: exit code 3", "misbehaving on purpose"}},
		{"action bad identity", misbehaveImage, map[string]any{"mode": "bad-identity", "on": "action"}, true, []string{"db: action misbehave call: stdout line 1: identity:"}},
		{"action identity not an object", misbehaveImage, map[string]any{"mode": "wrong-schema", "on": "action"}, true, []string{"db: action misbehave call: stdout line 1: identity:"}},
		{"init wrong protocol", variant("wrong-protocol"), nil, false, []string{"db: init call: adapter image " + variant("wrong-protocol") + " speaks gcompose protocol 2, this gcompose speaks 1"}},
		{"init garbage", variant("garbage"), nil, false, []string{"db: init call: answer is not JSON"}},
		{"init wrong schema", variant("wrong-schema"), nil, false, []string{"db: init call: answer invalid at /plugs: got array, want object", "at /state_action: got string, want object"}},
		{"init hang", variant("hang"), nil, false, []string{"call init for db timed out after 10s"}},
		{"init exit", variant("exit-nonzero"), nil, false, []string{"call init for db failed: exit code 3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient()
			tg := adapter.Target{App: e.app, Name: "db", Image: tc.image, Config: tc.config}
			st, err := c.State(e.ctx, tg, protocol.Present, nil)
			if tc.action {
				if err != nil {
					t.Fatalf("state: %v", err)
				}
				if st.Status != protocol.Stale || len(st.Actions) != 1 {
					t.Fatalf("state %+v", st)
				}
				_, err = c.Action(e.ctx, tg, st.Actions[0], st.StaleState, nil)
			}
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}

	// A plain Deployster adapter (init without gcompose member) fails any
	// call that carries one: it must never get one.
	t.Run("deployster", func(t *testing.T) {
		c := newClient()
		tg := adapter.Target{App: e.app, Name: "db", Image: variant("deployster")}
		info, err := c.Init(e.ctx, tg.Image, tg.Name)
		if err != nil || info.Ext {
			t.Fatalf("init: %+v %v", info, err)
		}
		st, err := c.State(e.ctx, tg, protocol.Present, &protocol.Persisted{Identity: map[string]any{"x": 1}})
		if err != nil || st.Status != protocol.Valid {
			t.Fatalf("state: %+v %v", st, err)
		}
	})
}
