package syncwriter_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/gcompose/gcompose/internal/syncwriter"
)

// Run with -race: unserialized writes to one bytes.Buffer are a data race,
// and interleaved writes would break the lines.
func TestConcurrentWritesStayWhole(t *testing.T) {
	var buf bytes.Buffer
	mu := new(sync.Mutex)
	a, b := syncwriter.Writer{Mu: mu, W: &buf}, syncwriter.Writer{Mu: mu, W: &buf}
	var wg sync.WaitGroup
	for i := range 8 {
		w := a
		if i%2 == 1 {
			w = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = w.Write([]byte("0123456789\n"))
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	for i, l := range lines {
		if l != "0123456789" {
			t.Fatalf("line %d is %q: writes interleaved", i, l)
		}
	}
}

// Run with -race: a reader and writers at once.
func TestBufferConcurrentWriteAndRead(t *testing.T) {
	var b syncwriter.Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("ab\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "ab\n"); got != 400 {
		t.Errorf("%d lines, want 400", got)
	}
}
