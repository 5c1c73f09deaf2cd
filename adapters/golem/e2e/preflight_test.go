package e2e

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// TestPreflight: without YAGNA_APPKEY, with a wrong one, or with no yagna
// answering, plan says so in one line before planning (naming the four
// Golem adapters once, not each resource's calls), exits 1 and writes no
// state; a plan with nothing deployed does not pass with a wrong key.
func TestPreflight(t *testing.T) {
	parallel(t)
	e := start(t, devnet.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "examples", "webapp", "webapp.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	desc := filepath.Join(e.dir, "webapp.yaml")
	if err := os.WriteFile(desc, src, 0o644); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	plan := func(env ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, e.bin, "plan", desc, "--app", e.app, "--state", e.state,
			"--network-image", e.images["network"], "--service-image", e.images["service"],
			"--payments-image", e.images["payments"], "--proxy-image", e.images["proxy"])
		cmd.Dir = e.dir
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "YAGNA_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, "XDG_CACHE_HOME="+filepath.Join(e.dir, "cache"))
		cmd.Env = append(cmd.Env, env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run()
		return out.String(), cmd.ProcessState.ExitCode()
	}
	all := "(adapters " + e.images["network"] + ", " + e.images["payments"] + ", " + e.images["proxy"] + ", " + e.images["service"] + "), so nothing was planned"
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no key", []string{"YAGNA_API_URL=" + e.url}, "Error: YAGNA_APPKEY is not set in gcompose's environment " + all},
		{"wrong key", []string{"YAGNA_API_URL=" + e.url, "YAGNA_APPKEY=not-the-key"}, "Error: yagna at " + e.url + " refused YAGNA_APPKEY (401 Unauthorized): set it to a key of that yagna (yagna app-key list) " + all},
		{"no yagna", []string{"YAGNA_API_URL=" + closed, "YAGNA_APPKEY=" + appKey}, "Error: yagna does not answer at " + closed + " (YAGNA_API_URL): "},
	} {
		out, code := plan(tc.env...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 1 || len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
			t.Errorf("%s: exit %d, want 1 and one line starting %q:\n%s", tc.name, code, tc.want, out)
		}
		if strings.Contains(out, "not-the-key") {
			t.Errorf("%s: the key is printed:\n%s", tc.name, out)
		}
		if _, err := os.Stat(filepath.Join(e.state, e.app+".json")); err == nil {
			t.Errorf("%s: a state was written", tc.name)
		}
	}
	out, code := plan("YAGNA_API_URL="+e.url, "GOLEM_REGISTRY_URL="+e.url, "YAGNA_APPKEY="+appKey)
	if code != 0 || !strings.Contains(out, "Plan: 5 to create") {
		t.Errorf("with the right key: exit %d\n%s", code, out)
	}
}
