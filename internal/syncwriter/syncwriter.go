// Package syncwriter serializes writes to a shared io.Writer.
package syncwriter

import (
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
