package descriptor

import (
	"archive/zip"
	"bytes"
	"context"
	"strings"
	"testing"
)

type zipEntry struct {
	name string
	body string
	// store writes the entry uncompressed.
	store bool
}

func makeZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		method := zip.Deflate
		if e.store {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const (
	pkgBase = `payloads:
  web:
    runtime: vm
    capabilities: [vpn]
services:
  web:
    payload: web
`
	pkgExtra = `payloads:
  web:
    runtime: vm
    capabilities: [gpu]
    params:
      image: nginx
`
)

func loadZip(t *testing.T, opts Options, entries ...zipEntry) (string, []string) {
	t.Helper()
	app, ds := newTestLoader(t, opts).LoadSources(context.Background(), Source{Name: "app.zip", Data: makeZip(t, entries...)})
	var lines []string
	for _, d := range ds {
		lines = append(lines, d.String())
	}
	if app == nil {
		return "", lines
	}
	out, err := Canonical(app)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), lines
}

// The files of a package have no order: any order gives the same result;
// lists concatenate in file-name order.
func TestPackageOrderIndependent(t *testing.T) {
	a, da := loadZip(t, Options{}, zipEntry{name: "a.yaml", body: pkgBase}, zipEntry{name: "b.yml", body: pkgExtra})
	b, db := loadZip(t, Options{}, zipEntry{name: "b.yml", body: pkgExtra}, zipEntry{name: "a.yaml", body: pkgBase})
	if len(da) > 0 || len(db) > 0 {
		t.Fatalf("diagnostics: %v %v", da, db)
	}
	if a != b {
		t.Fatalf("result depends on entry order:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(a, "capabilities:\n      - vpn\n      - gpu\n") {
		t.Errorf("capabilities not concatenated in file-name order:\n%s", a)
	}
}

func TestPackageErrors(t *testing.T) {
	big := strings.Repeat("# padding\n", 200_000) // 2 MB of comments
	cases := []struct {
		name    string
		opts    Options
		entries []zipEntry
		want    []string // each must be one diagnostic line, in order
	}{
		{
			name: "scalar conflict names both files",
			entries: []zipEntry{
				{name: "a.yaml", body: pkgBase},
				{name: "b.yaml", body: "payloads:\n  web:\n    runtime: vm/manifest\n"},
			},
			want: []string{`app.zip/b.yaml:3:14: payloads.web.runtime is "vm/manifest" here but "vm" at app.zip/a.yaml:3:14; the files of a package are not ordered, so they must agree`},
		},
		{
			name: "type clash names both files",
			entries: []zipEntry{
				{name: "a.yaml", body: pkgBase},
				{name: "b.yaml", body: "payloads:\n  web: vm\n"},
			},
			want: []string{`app.zip/b.yaml:2:8: cannot merge a scalar into a mapping for payloads.web: a scalar here, a mapping at app.zip/a.yaml:2:3`},
		},
		{
			name: "override has no meaning in a package",
			entries: []zipEntry{
				{name: "a.yaml", body: pkgBase},
				{name: "b.yaml", body: "payloads:\n  web:\n    capabilities: !override [gpu]\n"},
			},
			want: []string{`app.zip/b.yaml:3:5: !override has no meaning inside a package: its files are not ordered`},
		},
		{
			name:    "zip slip with ..",
			entries: []zipEntry{{name: "a.yaml", body: pkgBase}, {name: "../../etc/evil.yaml", body: pkgBase}},
			want:    []string{`app.zip: package entry "../../etc/evil.yaml" escapes the package (absolute path or ..); refusing the package`},
		},
		{
			name:    "absolute name",
			entries: []zipEntry{{name: "/etc/evil.yaml", body: pkgBase}},
			want:    []string{`app.zip: package entry "/etc/evil.yaml" escapes the package (absolute path or ..); refusing the package`},
		},
		{
			name:    "windows path",
			entries: []zipEntry{{name: `..\evil.yaml`, body: pkgBase}},
			want:    []string{`app.zip: package entry "..\\evil.yaml" escapes the package (absolute path or ..); refusing the package`},
		},
		{
			name:    "too many files",
			opts:    Options{Limits: Limits{MaxPackageFiles: 3}},
			entries: []zipEntry{{name: "a.yaml"}, {name: "b.yaml"}, {name: "c.yaml"}, {name: "d.yaml"}},
			want:    []string{`app.zip: package has 4 entries, more than the 3 allowed`},
		},
		{
			name:    "file too big",
			opts:    Options{Limits: Limits{MaxFileBytes: 1000}},
			entries: []zipEntry{{name: "a.yaml", body: pkgBase + strings.Repeat("#", 1000), store: true}},
			want:    []string{`app.zip/a.yaml: uncompressed size 1091 bytes is more than the 1000 allowed for a descriptor`},
		},
		{
			name:    "compression bomb",
			entries: []zipEntry{{name: "a.yaml", body: pkgBase + big}},
			want:    []string{`app.zip/a.yaml: compression ratio *:1 is more than the 200:1 allowed (a zip bomb?)`},
		},
		{
			name:    "total too big",
			opts:    Options{Limits: Limits{MaxPackageBytes: 3_000_000}},
			entries: []zipEntry{{name: "a.yaml", body: big, store: true}, {name: "b.yaml", body: big, store: true}},
			want:    []string{`app.zip: package uncompresses to more than the 3000000 bytes allowed`},
		},
		{
			name:    "no descriptor",
			entries: []zipEntry{{name: "README.md", body: "hi"}},
			want: []string{
				`app.zip: package holds no descriptor file (.yaml or .yml) at its root`,
				`app.zip/README.md: warning: ignored: not a descriptor file (.yaml or .yml)`,
			},
		},
		{
			name: "sub-folders are ignored with a warning",
			entries: []zipEntry{
				{name: "a.yaml", body: pkgBase},
				{name: "extra/", body: ""},
				{name: "extra/b.yaml", body: "nonsense: ["},
			},
			want: []string{`app.zip/extra/b.yaml: warning: ignored: a package's descriptor files are at its root, not in sub-folders`},
		},
		{
			name:    "not a zip",
			entries: nil,
			want:    []string{`app.zip: package holds no descriptor file (.yaml or .yml) at its root`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, got := loadZip(t, tc.opts, tc.entries...)
			if !matchLines(got, tc.want) {
				t.Errorf("diagnostics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestPackageNotZip(t *testing.T) {
	_, ds := newTestLoader(t, Options{}).LoadSources(context.Background(), Source{Name: "app.zip", Data: []byte("PK not really")})
	if len(ds) != 1 || !strings.HasPrefix(ds[0].String(), "app.zip: not a readable ZIP package: ") {
		t.Errorf("diagnostics: %v", ds)
	}
}

// A package merges with -f files like one file: the package first, then the
// override in order.
func TestPackageThenOverride(t *testing.T) {
	l := newTestLoader(t, Options{})
	app, ds := l.LoadSources(context.Background(),
		Source{Name: "app.zip", Data: makeZip(t, zipEntry{name: "a.yaml", body: pkgBase}, zipEntry{name: "b.yaml", body: pkgExtra})},
		Source{Name: "override.yaml", Data: []byte("payloads:\n  web:\n    runtime: vm/manifest\n")},
	)
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if got := app.Payloads["web"].Runtime; got != "vm/manifest" {
		t.Errorf("runtime %q, want the override's", got)
	}
	if want := []string{"app.zip/a.yaml", "app.zip/b.yaml", "override.yaml"}; strings.Join(app.Files, ",") != strings.Join(want, ",") {
		t.Errorf("Files %v, want %v", app.Files, want)
	}
	if app.Name != "app" {
		t.Errorf("Name %q, want the package's base name", app.Name)
	}
	if p := app.Pos("/payloads/web/runtime"); p.String() != "override.yaml:3:14" {
		t.Errorf("runtime position %s", p)
	}
}

// matchLines compares diagnostics with wanted lines, where * in a wanted line
// matches any number (compressed sizes vary with the Go version).
func matchLines(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		before, after, wild := strings.Cut(want[i], "*")
		if !wild {
			if got[i] != want[i] {
				return false
			}
			continue
		}
		if !strings.HasPrefix(got[i], before) || !strings.HasSuffix(got[i], after) || len(got[i]) <= len(before)+len(after) {
			return false
		}
	}
	return true
}
