package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/pkg/stdcopy"
)

// Session is a long-lived adapter container (serve mode): gcompose writes
// request lines to its stdin and reads response lines from its stdout for as
// long as it runs. Its stderr is forwarded like Run's. It is created with
// AutoRemove: if gcompose dies, the Engine closes the container's stdin, the
// adapter ends and the container disappears by itself.
type Session struct {
	r        *Runner
	id       string
	spec     Spec
	hj       types.HijackedResponse
	stdout   *io.PipeReader
	done     chan struct{}
	writeMu  sync.Mutex
	tailMu   sync.Mutex
	stderr   *lineWriter
	endErr   error // why the output ended (nil: the container exited)
	stopOnce sync.Once
}

// Start creates, attaches and starts a container that keeps running: Spec's
// Stdin, Timeout and StdoutLimit do not apply (the caller frames and bounds
// the stream). ctx bounds the start only.
func (r *Runner) Start(ctx context.Context, s Spec) (*Session, error) {
	fail := func(step string, err error) error {
		return &CallError{Image: s.Image, Call: s.Call, Resource: s.Resource, Kind: KindEngine, Step: step, Err: err}
	}
	if err := r.checkMounts(ctx, s); err != nil {
		return nil, fail("create container", err)
	}
	cfg, hc := r.containerConfig(s)
	hc.AutoRemove = true
	created, err := r.create(ctx, cfg, hc)
	if err != nil {
		return nil, fail("create container", explainCreate(err, s))
	}
	id := created.ID
	// A container it could not remove is named in the error: no silent orphan.
	failRemoving := func(step string, err error) error {
		ce := fail(step, err).(*CallError)
		if rmErr := r.removeDetached(ctx, id); rmErr != nil {
			ce.Leftover, ce.LeftoverErr = shortID(id), rmErr
		}
		return ce
	}
	hj, err := r.attach(ctx, id)
	if err != nil {
		return nil, failRemoving("attach container", err)
	}
	if err := r.start(ctx, id); err != nil {
		hj.Close()
		return nil, failRemoving("start container", err)
	}
	pr, pw := io.Pipe()
	ss := &Session{r: r, id: id, spec: s, hj: hj, stdout: pr, done: make(chan struct{}),
		stderr: &lineWriter{w: s.Stderr, prefix: "[" + s.Resource + "] ", tail: &tail{max: StderrTailSize}}}
	r.mu.Lock()
	r.sessions[ss] = struct{}{}
	r.mu.Unlock()
	go func() {
		_, err := stdcopy.StdCopy(pw, lockedW{&ss.tailMu, ss.stderr}, hj.Reader)
		ss.tailMu.Lock()
		ss.stderr.flush()
		ss.tailMu.Unlock()
		ss.endErr = err
		if err == nil {
			err = io.EOF
		}
		pw.CloseWithError(err)
		close(ss.done)
	}()
	return ss, nil
}

type lockedW struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedW) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ID is the container's ID.
func (s *Session) ID() string { return s.id }

// Stdout is the container's stdout; it ends (io.EOF) when the container does.
func (s *Session) Stdout() io.Reader { return s.stdout }

// Write sends bytes to the container's stdin; concurrent Writes do not
// interleave.
func (s *Session) Write(p []byte) (int, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	select {
	case <-s.done:
		return 0, fmt.Errorf("adapter %s server for %s: container ended", s.spec.Image, s.spec.Resource)
	default:
	}
	return s.hj.Conn.Write(p)
}

// Done is closed when the container's output has ended (it exited or was
// removed).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the output ended, once Done is closed (nil: the container
// exited and closed its streams).
func (s *Session) Err() error {
	<-s.done
	return s.endErr
}

// StderrTail is the last ~4 KiB of the container's stderr so far.
func (s *Session) StderrTail() string {
	s.tailMu.Lock()
	defer s.tailMu.Unlock()
	return s.stderr.tail.String()
}

// Close ends the session gracefully: it closes the container's stdin, waits
// until ctx is done for the adapter to finish what it has in flight and
// exit, then removes the container if it still exists.
func (s *Session) Close(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() {
		s.writeMu.Lock()
		_ = s.hj.CloseWrite()
		s.writeMu.Unlock()
		select {
		case <-s.done:
		case <-ctx.Done():
		}
		err = s.kill(ctx)
	})
	return err
}

// Kill removes the container at once.
func (s *Session) Kill(ctx context.Context) error {
	var err error
	s.stopOnce.Do(func() { err = s.kill(ctx) })
	return err
}

func (s *Session) kill(ctx context.Context) error {
	defer func() {
		s.r.mu.Lock()
		delete(s.r.sessions, s)
		s.r.mu.Unlock()
	}()
	// The Engine may be auto-removing it already: remove waits until it is gone.
	err := s.r.removeDetached(ctx, s.id)
	s.hj.Close()
	// Wait for the copy to end so that the tail is final.
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	if err != nil {
		return fmt.Errorf("adapter %s server for %s: %w (once the engine answers, remove it with docker rm -f %s)", s.spec.Image, s.spec.Resource, err, shortID(s.id))
	}
	return nil
}
