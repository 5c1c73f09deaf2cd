package adapter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/protocol"
)

func boolp(b bool) *bool { return &b }

// TestMountsFor is a unit test of plug selection: no Docker needed.
func TestMountsFor(t *testing.T) {
	const sock = "/var/run/docker.sock"
	declared := map[string]protocol.PlugSpec{
		"data":   {ContainerPath: "/data"},
		"conf":   {ContainerPath: "/conf", Optional: true, Writable: boolp(false)},
		"docker": {ContainerPath: sock, Optional: true},
	}
	cases := []struct {
		name    string
		res     string
		called  string // the name recorded in the state ("": none)
		typ     string
		plugs   map[string]Plug
		adapter map[string]protocol.PlugSpec
		want    string // mounts as "host:container:ro|rw", sorted by plug name
		err     string
	}{
		{name: "required plug defined", res: "files.a", plugs: map[string]Plug{"data": {Path: "/h/data"}},
			adapter: declared, want: "/h/data:/data:rw"},
		{name: "required plug missing", res: "files.a", plugs: nil, adapter: declared,
			err: `files.a: adapter img requires plug "data", which the descriptor does not define`},
		{name: "descriptor read_only wins", res: "files.a", adapter: map[string]protocol.PlugSpec{"conf": declared["conf"]},
			plugs: map[string]Plug{"conf": {Path: "/h/conf", ReadOnly: true}}, want: "/h/conf:/conf:ro"},
		{name: "adapter read-only wins", res: "files.a", adapter: map[string]protocol.PlugSpec{"conf": declared["conf"]},
			plugs: map[string]Plug{"conf": {Path: "/h/conf"}}, want: "/h/conf:/conf:ro"},
		{name: "writable required on read_only plug", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ReadOnly: true}},
			err:   `files.a: adapter img requires plug "data" writable, but the descriptor makes it read_only`},
		{name: "optional writable on read_only plug skipped", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data"}, "docker": {Path: sock, ReadOnly: true}}, want: "/h/data:/data:rw"},
		{name: "extra descriptor plugs are not mounted", res: "files.a", adapter: map[string]protocol.PlugSpec{},
			plugs: map[string]Plug{"data": {Path: "/h/data"}, "docker": {Path: sock}}, want: ""},
		{name: "docker socket only when declared in the descriptor", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data"}}, want: "/h/data:/data:rw"},
		{name: "docker socket declared", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data"}, "docker": {Path: sock}}, want: "/h/data:/data:rw," + sock + ":" + sock + ":rw"},
		{name: "a plug that cannot be mounted fails the adapter that requires it", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Err: fmt.Errorf("DOCKER_HOST=tcp://h:2376 is not a unix socket")}},
			err:   `files.a: adapter img requires plug "data": DOCKER_HOST=tcp://h:2376 is not a unix socket`},
		{name: "a plug that cannot be mounted is skipped when optional", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data"}, "docker": {Err: fmt.Errorf("no socket")}}, want: "/h/data:/data:rw"},
		// resource_names match the name as written in the descriptor (what
		// the adapter receives), as Deployster's re.match on the manifest key.
		{name: "resource_names match the descriptor's name", res: "resources.n0", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^n0"}}}, want: "/h/data:/data:rw"},
		{name: "docs/descriptor.md example", res: "resources.db-files", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^db-.*$"}}}, want: "/h/data:/data:rw"},
		{name: "a service's name", res: "services.db", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^db$"}}}, want: "/h/data:/data:rw"},
		{name: "an instance's name", res: "services.db[1]", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^db-1$"}}}, want: "/h/data:/data:rw"},
		{name: "the address is not matched", res: "resources.n0", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^resources\\.n0"}}}, err: "does not allow"},
		{name: "a recorded old name does not change which plugs apply", res: "resources.n0", called: "resources.n0", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"^n0"}}}, want: "/h/data:/data:rw"},
		{name: "resource_names no match, required", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"services\\."}}},
			err:   `files.a: adapter img requires plug "data", which the descriptor does not allow for this resource`},
		{name: "match is anchored at the start", res: "resources.xdb", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"db"}}}, err: "does not allow"},
		{name: "resource_types match", res: "files.a", typ: "gcompose/file-adapter:dev", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"nope"}, ResourceTypes: []string{"gcompose/file-"}}}, want: "/h/data:/data:rw"},
		{name: "optional not allowed skipped", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data"}, "docker": {Path: sock, ResourceNames: []string{"admin\\."}}}, want: "/h/data:/data:rw"},
		{name: "bad regexp", res: "files.a", adapter: declared,
			plugs: map[string]Plug{"data": {Path: "/h/data", ResourceNames: []string{"("}}}, err: `files.a: plug "data": resource_names: bad regular expression "("`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			typ := tc.typ
			if typ == "" {
				typ = "img"
			}
			info := &Info{ImageRef: "img", Init: protocol.InitResult{Plugs: tc.adapter}}
			mounts, err := mountsFor(info, Target{Name: tc.res, AdapterName: tc.called, Image: typ, Plugs: tc.plugs})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := render(mounts); got != tc.want {
				t.Fatalf("mounts %q, want %q", got, tc.want)
			}
		})
	}
}

func render(ms []runner.Mount) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		mode := "rw"
		if m.ReadOnly {
			mode = "ro"
		}
		parts[i] = fmt.Sprintf("%s:%s:%s", m.HostPath, m.ContainerPath, mode)
	}
	return strings.Join(parts, ",")
}
