package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/testimage"
)

// The engine's reason for refusing an attach reaches the caller (the client
// library would say only "unable to upgrade to tcp, received 404").
func TestAttachKeepsTheEnginesAnswer(t *testing.T) {
	testimage.RequireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.attach(ctx, "gcompose-no-such-container")
	if err == nil {
		t.Fatal("attach to a container that does not exist succeeded")
	}
	if !client.IsErrNotFound(err) || !strings.Contains(strings.ToLower(err.Error()), "no such container") {
		t.Errorf("attach to a missing container: %v (not found: %v), want the engine's \"no such container\"", err, client.IsErrNotFound(err))
	}
}

func TestEngineError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"docker", 404, `{"message":"No such container: x"}`, "the engine answered 404 Not Found: No such container: x"},
		{"podman", 409, `{"cause":"operation not permitted","message":"runc: error setting rlimit type 7: operation not permitted","response":409}`,
			"the engine answered 409 Conflict: runc: error setting rlimit type 7: operation not permitted"},
		{"podman cause apart", 500, `{"cause":"container state improper","message":"cannot remove","response":500}`,
			"the engine answered 500 Internal Server Error: cannot remove (container state improper)"},
		{"text", 502, "bad gateway\n", "the engine answered 502 Bad Gateway: bad gateway"},
		{"empty", 409, "", "the engine answered 409 Conflict: no explanation given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineError(tc.status, []byte(tc.body)).Error(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLocalName(t *testing.T) {
	for ref, want := range map[string]string{
		"gcompose/file-adapter:dev":           "localhost/gcompose/file-adapter:dev",
		"busybox":                             "localhost/busybox",
		"localhost/gcompose/file-adapter:dev": "",
		"docker.io/library/busybox":           "",
		"registry:5000/x":                     "",
		"sha256:0123abcd":                     "",
		"gcompose/x@sha256:0123abcd":          "",
	} {
		if got := localName(ref); got != want {
			t.Errorf("localName(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestDroppedLimits(t *testing.T) {
	pids := int64(DefaultPids)
	asked := DefaultResources()
	for _, tc := range []struct {
		name string
		got  container.Resources
		want string
	}{
		{"docker", asked, ""},
		{"podman rootful", container.Resources{Memory: asked.Memory, MemorySwap: asked.Memory, NanoCPUs: asked.NanoCPUs, PidsLimit: &pids,
			Ulimits: []*container.Ulimit{{Name: "RLIMIT_NOFILE", Soft: NofileSoft, Hard: NofileHard}, {Name: "RLIMIT_NPROC", Soft: Nproc, Hard: Nproc}}}, ""},
		{"podman rootless, cgroups v2", container.Resources{Memory: asked.Memory, NanoCPUs: asked.NanoCPUs, PidsLimit: &pids}, "nofile ulimit, nproc ulimit"},
		{"podman rootless, cgroups v1", container.Resources{}, "memory, CPUs, PIDs, nofile ulimit, nproc ulimit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(droppedLimits(asked, tc.got), ", "); got != tc.want {
				t.Errorf("dropped %q, want %q", got, tc.want)
			}
		})
	}
}
