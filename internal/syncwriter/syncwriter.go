// Package syncwriter serializes writes to a shared io.Writer, and holds the
// one buffer that concurrent writers and a reader may share.
package syncwriter

import (
	"bytes"
	"io"
	"sync"
)

// Writer writes to W holding Mu, so that each Write reaches W whole, never
// interleaved with another goroutine's. Several Writers may share one Mu to
// serialize writes to the same W (a log handler and a raw stream on stderr).
type Writer struct {
	Mu *sync.Mutex
	W  io.Writer
}

func (l Writer) Write(p []byte) (int, error) {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return l.W.Write(p)
}

// Buffer is a bytes.Buffer that goroutines may write and read at the same
// time: the capture of a log or a stream written concurrently. The zero
// value is an empty buffer.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
