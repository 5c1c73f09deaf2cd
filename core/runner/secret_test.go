package runner

import (
	"encoding/json"
	"strings"
	"testing"
)

// What the request carries (config, credentials) goes to the container on
// stdin only: nothing of it is in the container's environment, command,
// entrypoint, labels or host config, which docker inspect and ps show.
func TestStdinIsTheOnlyChannel(t *testing.T) {
	const secret = "s3cr3t-stdin-only"
	r := &Runner{opts: Options{Labels: map[string]string{"gcompose.test": "x"}}}
	spec := Spec{
		Image: "img", Args: []string{"state"}, Entrypoint: []string{"/adapter"},
		Stdin: []byte(`{"config":{"password":"` + secret + `"},"gcompose":{"env":{"YAGNA_APPKEY":"` + secret + `"}}}`),
		App:   "app", Resource: "db", Call: "state",
		Mounts: []Mount{{HostPath: "/tmp", ContainerPath: "/plug"}},
	}
	cfg, hc := r.containerConfig(spec)
	if len(cfg.Env) != 0 {
		t.Errorf("container environment: %v", cfg.Env)
	}
	for what, v := range map[string]any{"config": cfg, "host config": hc} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("the %s shows the secret: %s", what, b)
		}
	}
}
