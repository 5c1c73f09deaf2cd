package dockerbuild

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestContext(t *testing.T) {
	b, err := Context([]byte("FROM scratch\n"), map[string]File{
		"b-bin": {Data: []byte("bin")}, "a.conf": {Data: []byte("x"), Mode: 0o600}, "Dockerfile": {Data: []byte("ignored")}})
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(b)
	var got []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if h.ModTime.Unix() != 0 {
			t.Errorf("%s: time %v, want the epoch", h.Name, h.ModTime)
		}
		got = append(got, fmt.Sprintf("%s %o %s", h.Name, h.Mode, data))
	}
	want := []string{"Dockerfile 644 FROM scratch\n", "a.conf 600 x", "b-bin 755 bin"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("context:\n%q\nwant\n%q", got, want)
	}
}

func TestReadOutput(t *testing.T) {
	if err := readOutput(strings.NewReader(`{"stream":"Step 1/2\n"}{"stream":"ok\n"}`)); err != nil {
		t.Errorf("a build without error: %v", err)
	}
	err := readOutput(strings.NewReader(`{"stream":"Step 1/2 : COPY x /x\n"}{"error":"COPY failed: no x"}`))
	if err == nil || !strings.Contains(err.Error(), "COPY failed: no x") || !strings.Contains(err.Error(), "Step 1/2 : COPY x /x") {
		t.Errorf("a failed build: %v; want its error and output", err)
	}
	if err := readOutput(strings.NewReader(`{"stream":`)); err == nil {
		t.Error("a cut-off output is not an error")
	}
}
