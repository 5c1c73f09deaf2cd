package descriptor

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The GAP-16 merge example: base payload nginx with params.image and
// capability vpn; the override adds params.repo and capability gpu.
func TestGAP16MergeExample(t *testing.T) {
	dir := "testdata/cases/gap16-merge"
	app, ds := newTestLoader(t, Options{}).Load(context.Background(),
		filepath.Join(dir, "1-base.yaml"), filepath.Join(dir, "2-override.yaml"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	p := app.Payloads["nginx"]
	if keys := slices.Sorted(maps.Keys(p.Params)); !reflect.DeepEqual(keys, []string{"image", "repo"}) {
		t.Errorf("params keys %v, want [image repo]", keys)
	}
	if !reflect.DeepEqual(p.Capabilities, []string{"vpn", "gpu"}) {
		t.Errorf("capabilities %v, want [vpn gpu]", p.Capabilities)
	}
	if p.Runtime != "vm" || app.Services["web"].Payload != "nginx" || app.Name != "nginx-demo" {
		t.Errorf("base values lost: %+v %+v %q", p, app.Services["web"], app.Name)
	}
	for ptr, want := range map[string]string{
		"/payloads/nginx/params/image":    dir + "/1-base.yaml:10:14",
		"/payloads/nginx/params/repo":     dir + "/2-override.yaml:6:13",
		"/payloads/nginx/capabilities/0":  dir + "/1-base.yaml:8:9",
		"/payloads/nginx/capabilities/1":  dir + "/2-override.yaml:4:9",
		"/services/web/ip/0":              dir + "/1-base.yaml:18:9",
		"/services/web/instances":         dir + "/1-base.yaml:15:3", // default: the service's position
		"/payloads/nginx/params/image/no": dir + "/1-base.yaml:10:14",
	} {
		if got := app.Pos(ptr).String(); got != want {
			t.Errorf("Pos(%s) = %s, want %s", ptr, got, want)
		}
	}
}

// Every value of the canonical tree has a position, and every string leaf
// written on one line is found on the line its position names.
func TestPositionsCoverTree(t *testing.T) {
	files, _ := filepath.Glob("testdata/conformance/*/*.yaml")
	files = append(files, "testdata/cases/shorthands/app.yaml")
	l := newTestLoader(t, Options{})
	for _, f := range files {
		app, ds := l.Load(context.Background(), f)
		if ds.HasErrors() {
			t.Fatalf("%s: %v", f, ds)
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		walkTree(app.Tree(), "", func(ptr string, v any) {
			p := app.Pos(ptr)
			if !p.IsValid() || p.File != f {
				t.Errorf("%s: %s has no position (%s)", f, ptr, p)
				return
			}
			if _, exact := app.Positions[ptr]; !exact && !strings.HasSuffix(ptr, "/instances") && !strings.HasSuffix(ptr, "/read_only") {
				t.Errorf("%s: %s has only its parent's position", f, ptr)
			}
			s, ok := v.(string)
			if !ok || strings.HasPrefix(ptr, "/services/") && strings.HasSuffix(ptr, "/network") || strings.Contains(ptr, "/ports/") {
				return
			}
			if len(s) > 20 {
				s = s[:20] // a folded string spans lines
			}
			if s == DefaultNetworkIP && strings.HasPrefix(ptr, "/networks/") {
				return // may be the implicit default
			}
			line := lines[p.Line-1]
			if strings.ContainsAny(s, `"\`) || strings.HasSuffix(line, `"`) {
				return // escaped, or a folded string starting on the next line
			}
			if !strings.Contains(line, s) {
				t.Errorf("%s: %s = %q is not on line %d: %q", f, ptr, s, p.Line, line)
			}
		})
	}
}

func walkTree(v any, ptr string, fn func(string, any)) {
	if ptr != "" {
		fn(ptr, v)
	}
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		for _, k := range keys {
			walkTree(v[k], ptr+"/"+pointerEscape(k), fn)
		}
	case []any:
		for i, it := range v {
			walkTree(it, ptr+"/"+strconv.Itoa(i), fn)
		}
	}
}

func TestLoadFromDisk(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("My App.yaml", "payloads:\n  p: {runtime: vm}\nservices:\n  s: {payload: p}\n")
	l := newTestLoader(t, Options{Limits: Limits{MaxFileBytes: 100}})

	app, ds := l.Load(context.Background(), good)
	if len(ds) > 0 || app.Name != "my-app" || !reflect.DeepEqual(app.Files, []string{good}) {
		t.Fatalf("app %+v, diagnostics %v", app, ds)
	}

	cases := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "nope.yaml"), filepath.Join(dir, "nope.yaml") + ": reading descriptor: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory"},
		{"directory", dir, dir + ": is a directory, not a descriptor file or .zip package"},
		{"too big", write("big.yaml", strings.Repeat("#", 101)), filepath.Join(dir, "big.yaml") + ": file is 101 bytes, more than the 100 allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app, ds := l.Load(context.Background(), good, tc.path)
			if app != nil || len(ds) != 1 || ds[0].String() != tc.want {
				t.Errorf("got %v, want %s", ds, tc.want)
			}
		})
	}
	if _, ds := l.Load(context.Background()); len(ds) != 1 || ds[0].Message != "no descriptor file given" {
		t.Errorf("no files: %v", ds)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if app, ds := l.Load(ctx, good); app != nil || !ds.HasErrors() || !strings.Contains(ds.Error(), "context canceled") {
		t.Errorf("canceled: %v", ds)
	}
}

func TestIgnoreUnknownKeepsWarnings(t *testing.T) {
	src := Source{Name: "a.yaml", Data: []byte("payloads:\n  p: {runtime: vm, extra: 1}\nservices:\n  s: {payload: p}\n")}
	app, ds := newTestLoader(t, Options{IgnoreUnknown: true}).LoadSources(context.Background(), src)
	if ds.HasErrors() || len(app.Warnings) != 1 || app.Warnings[0].String() != `a.yaml:2:20: warning: ignored unknown key "extra"; allowed here: build, capabilities, constraints, params, runtime` {
		t.Fatalf("diagnostics %v, warnings %v", ds, app.Warnings)
	}
	if _, ok := app.Tree()["payloads"].(map[string]any)["p"].(map[string]any)["extra"]; ok {
		t.Error("unknown key kept")
	}
}

func TestHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"External API request [EXPERIMENTAL].": "external-api-request-experimental",
		"  --Simple--service--  ":              "simple-service",
		strings.Repeat("a", 80):                strings.Repeat("a", 63),
		"ÄÖÜ":                                  "",
	} {
		if got := sanitizeName(in); got != want {
			t.Errorf("sanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
	good := []string{"nginx", "nginx:1.25", "registry:5000/img:tag", "localhost/x", "ghcr.io/a/b/c:v1.0-rc.1",
		"img@sha256:" + strings.Repeat("a", 64), "registry:5000/img:tag@sha256:" + strings.Repeat("0", 64), "[::1]:5000/img"}
	for _, ref := range good {
		if why := checkImageRef(ref); why != "" {
			t.Errorf("checkImageRef(%q): %s", ref, why)
		}
	}
	bad := map[string]string{
		"":                                      "is empty",
		"Nginx":                                 `has an invalid path component "Nginx" (lower-case letters, digits and . _ - separators)`,
		"img:":                                  `has an invalid tag ""`,
		"img@sha256:abc":                        `has an invalid digest "sha256:abc" (want algorithm:hex, e.g. sha256:<64 hex digits>)`,
		"img@sha256:" + strings.Repeat("a", 40): "has a sha256 digest of 40 hex digits, not 64",
		"bad_host:5000/img":                     `has an invalid registry "bad_host:5000"`,
		"a//b":                                  `has an invalid path component "" (lower-case letters, digits and . _ - separators)`,
	}
	for ref, want := range bad {
		if got := checkImageRef(ref); got != want {
			t.Errorf("checkImageRef(%q) = %q, want %q", ref, got, want)
		}
	}
	ports := map[string]PortMapping{"80": {Remote: 80}, "8080:80": {Local: 8080, Remote: 80}, " 443 ": {Remote: 443}}
	for in, want := range ports {
		if got, msg := ParsePortMapping(in); got != want || msg != "" {
			t.Errorf("ParsePortMapping(%q) = %v, %q", in, got, msg)
		}
	}
	for _, in := range []string{"", "0", "65536", "+80", "a:80", "80:", "1:2:3", "-1"} {
		if _, msg := ParsePortMapping(in); msg == "" {
			t.Errorf("ParsePortMapping(%q) accepted", in)
		}
	}
}

// Inputs that once made (or could make) the loader quadratic still load: long
// names that are compared for "did you mean", many !reset keys, many unknown
// keys dropped under IgnoreUnknown.
func TestNoQuadraticInputs(t *testing.T) {
	long := strings.Repeat("a", 30_000)
	var resets, unknown strings.Builder
	resets.WriteString("meta:\n")
	unknown.WriteString("payloads:\n  p:\n    runtime: vm\n")
	for i := 0; i < 50_000; i++ {
		resets.WriteString("  k" + strconv.Itoa(i) + ": !reset\n")
		unknown.WriteString("    u" + strconv.Itoa(i) + ": 1\n")
	}
	l := newTestLoader(t, Options{IgnoreUnknown: true})
	for name, srcs := range map[string][]Source{
		"long names": {{Name: "a.yaml", Data: []byte("payloads:\n  " + long + "b: {runtime: vm}\nservices:\n  s: {payload: " + long + "c}\n")}},
		"resets":     {{Name: "a.yaml", Data: []byte("payloads: {}\n")}, {Name: "b.yaml", Data: []byte(resets.String())}},
		"unknown":    {{Name: "a.yaml", Data: []byte(unknown.String())}},
	} {
		t.Run(name, func(t *testing.T) {
			_, ds := l.LoadSources(context.Background(), srcs...)
			if name == "unknown" && len(ds) != 50_000 {
				t.Errorf("%d diagnostics, want 50000 warnings", len(ds))
			}
		})
	}
}

// One Loader serves concurrent loads (run with -race).
func TestLoaderConcurrent(t *testing.T) {
	l := newTestLoader(t, Options{})
	files, _ := filepath.Glob("testdata/conformance/*/*.yaml")
	files = append(files, "testdata/cases/type-errors/app.yaml")
	done := make(chan string)
	for _, f := range files {
		go func() {
			app, ds := l.Load(context.Background(), f)
			if app != nil {
				if _, err := Canonical(app); err != nil {
					done <- err.Error()
					return
				}
			}
			done <- ds.Error()
		}()
	}
	for range files {
		<-done
	}
}
