package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/cmd/gcompose/internal/progress"
	"github.com/gcompose/gcompose/internal/testimage"
)

// buildCLIImage builds images/gcompose.Dockerfile as `make images` does (a
// static CLI and the host's CA bundle, or an empty one) and returns its
// reference: gcompose-test/gcompose:ci with the content's hash, so that a
// run from another checkout never replaces it.
func buildCLIImage(t *testing.T, ctx context.Context) string {
	t.Helper()
	ca := "/etc/ssl/certs/ca-certificates.crt"
	if _, err := os.Stat(ca); err != nil {
		ca = filepath.Join(t.TempDir(), "ca-certificates.crt")
		if err := os.WriteFile(ca, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return testimage.DockerfileImage(t, ctx, testimage.Dockerfile{Path: "images/gcompose.Dockerfile", Mains: []string{"./cmd/gcompose"},
		Files: map[string]string{"ca-certificates.crt": ca}}, "gcompose-test/gcompose:ci")
}

// TestComposeRunDeploysAndDestroys is a CI job with nothing but Docker: the
// gcompose image run by docker-compose.yml's gcompose service deploys a
// file-adapter app in a workspace, the files appear on the host, and a
// destroy run the same way removes them and leaves no container behind.
func TestComposeRunDeploysAndDestroys(t *testing.T) {
	testimage.RequireDocker(t)
	if _, err := exec.LookPath("docker-compose"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("docker-compose is not installed")
		}
		t.Skip("docker-compose is not installed")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cliImage := buildCLIImage(t, ctx)
	image := testimage.Image(t, ctx, "./cmd/file-adapter", fileAdapterName)

	// The workspace: mounted at its own path in the gcompose container, so
	// the plug path ./out is a path the Engine can bind.
	ws := t.TempDir()
	app := appNameFor(t)
	project := "gcompose-" + app
	if err := os.MkdirAll(filepath.Join(ws, "out"), 0o777); err != nil {
		t.Fatal(err)
	}
	desc := strings.NewReplacer("APP", app, "IMAGE", image).Replace(`
meta:
  name: APP
plugs:
  files:
    path: ./out
resources:
  conf:
    type: IMAGE
    config: {path: app.conf, content: "listen = 8080\n"}
  sum:
    type: IMAGE
    config: {path: app.conf.sha256, content: "${resources.conf.state.sha256}  app.conf\n"}
`)
	if err := os.WriteFile(filepath.Join(ws, "app.yaml"), []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	compose := func(args ...string) (string, string) {
		t.Helper()
		full := append([]string{"-f", filepath.Join(repo, "docker-compose.yml"), "-p", project, "run", "--rm", "-T", "gcompose"}, args...)
		cmd := exec.Command("docker-compose", full...)
		cmd.Dir = ws
		// docker-compose reads ${PWD} from its environment, not from its
		// working directory.
		cmd.Env = append(os.Environ(), "PWD="+ws, "GCOMPOSE_IMAGE="+cliImage, "GCOMPOSE_STATE=", "GCOMPOSE_PROGRESS=",
			"GCOMPOSE_ENGINE_SOCKET="+engineSocket(t))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("docker-compose %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(full, " "), err, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	// docker-compose run creates the file's default network (a fixed name,
	// shared with the devnet service); remove it afterwards unless it was
	// there before the test, so the test leaves nothing behind.
	cli := testimage.Client(t)
	const composeNetwork = "gcompose-devnet"
	_, netErr := cli.NetworkInspect(ctx, composeNetwork, network.InspectOptions{})
	hadNetwork := netErr == nil
	t.Cleanup(func() {
		if !hadNetwork {
			if err := cli.NetworkRemove(ctx, composeNetwork); err != nil && !client.IsErrNotFound(err) {
				t.Errorf("removing the network %s that docker-compose run created: %v", composeNetwork, err)
			}
		}
		if ids := testimage.ContainersLabelled(t, ctx, "com.docker.compose.project", project); len(ids) > 0 {
			t.Errorf("compose containers left behind: %v", ids)
		}
		// docker-compose run creates the file's volumes too (the devnet service's VPN socket volume).
		vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "com.docker.compose.project="+project))})
		if err == nil {
			for _, v := range vols.Volumes {
				if err := cli.VolumeRemove(ctx, v.Name, true); err != nil {
					t.Errorf("removing the volume %s that docker-compose run created: %v", v.Name, err)
				}
			}
		}
		if ids := testimage.ContainersLabelled(t, ctx, "gcompose.app", app); len(ids) > 0 {
			t.Errorf("adapter containers left behind: %v", ids)
		}
	})

	stdout, stderr := compose("deploy", "-f", "app.yaml", "--yes", "--json")
	sum := lastSummary(t, stdout)
	if !sum.OK || sum.ExitCode != 0 || sum.Counts.Changed != 2 {
		t.Fatalf("deploy summary %+v\nstderr:\n%s", sum, stderr)
	}
	got, err := os.ReadFile(filepath.Join(ws, "out", "app.conf"))
	if err != nil || string(got) != "listen = 8080\n" {
		t.Fatalf("app.conf on the host: %q, %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out", "app.conf.sha256")); err != nil || !strings.HasSuffix(string(b), "  app.conf\n") || len(b) != 64+len("  app.conf\n") {
		t.Fatalf("app.conf.sha256 on the host: %q, %v", b, err)
	}
	// The state is in the workspace, at the path the host sees.
	if _, err := os.Stat(filepath.Join(ws, ".gcompose", "state", app+".json")); err != nil {
		t.Fatalf("state not in the workspace: %v", err)
	}

	stdout, _ = compose("destroy", "-f", "app.yaml", "--yes", "--json")
	if sum := lastSummary(t, stdout); !sum.OK || sum.Counts.Changed != 2 {
		t.Fatalf("destroy summary %+v", sum)
	}
	for _, f := range []string{"app.conf", "app.conf.sha256"} {
		if _, err := os.Stat(filepath.Join(ws, "out", f)); !os.IsNotExist(err) {
			t.Errorf("%s still exists after destroy (%v)", f, err)
		}
	}
}

// engineSocket is the socket of the engine the test runs on (DOCKER_HOST,
// e.g. Podman's), which the gcompose container gets at /var/run/docker.sock.
func engineSocket(t *testing.T) string {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		return "/var/run/docker.sock"
	}
	path, ok := strings.CutPrefix(host, "unix://")
	if !ok {
		t.Skipf("the gcompose container reaches the engine through a socket; DOCKER_HOST=%s is none", host)
	}
	return path
}

// lastSummary parses and schema-checks the summary object on stdout.
func lastSummary(t *testing.T, stdout string) progress.Summary {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	if err := progress.ValidateLine([]byte(last)); err != nil {
		t.Fatalf("summary does not match schemas/events.schema.json: %v\n%s", err, last)
	}
	var s progress.Summary
	if err := json.Unmarshal([]byte(last), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, last)
	}
	return s
}
