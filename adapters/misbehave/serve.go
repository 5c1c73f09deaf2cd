package misbehave

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/gcompose/gcompose/protocol"
)

// serve is serve mode (offered when the image's init mode is InitServe).
// Each request line is answered by the one-shot logic, and its misbehaviour
// translated to what a broken server does:
//
//   - hang: that request is never answered;
//   - garbage, huge-output (state or init): the bytes go raw onto stdout,
//     breaking the framing;
//   - wrong-schema: a well-framed response whose result has the wrong shape;
//   - exit-nonzero: the whole server exits with ExitCode, taking every call
//     in flight with it (gcompose restarts it once);
//   - any other failure: an error response.
func serve(ctx context.Context, env Env, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{ctx: ctx, env: env, stdout: stdout, stderr: stderr, died: make(chan int, 1)}
	defer s.close()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()

	var wg sync.WaitGroup
	for {
		select {
		case code := <-s.died:
			return code
		case line, ok := <-lines:
			if !ok {
				return s.drain(&wg, readErr)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.handle(line)
			}()
		}
	}
}

type server struct {
	ctx            context.Context
	env            Env
	mu             sync.Mutex // stdout, stderr and closed
	stdout, stderr io.Writer
	closed         bool // serve returned: calls still running write nothing
	died           chan int
}

// close stops all output: in a process, calls still running die with it;
// in-process (tests), they must not write after serve returned.
func (s *server) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
}

// drain waits for the calls in flight once stdin is closed (a hung call
// keeps the server up until it is killed, as a real one would).
func (s *server) drain(wg *sync.WaitGroup, readErr <-chan error) int {
	idle := make(chan struct{})
	go func() { wg.Wait(); close(idle) }()
	select {
	case <-idle:
	case code := <-s.died:
		return code
	case <-s.ctx.Done():
		return 1
	}
	select {
	case err := <-readErr:
		if err != nil {
			s.log("misbehave: read requests: %v\n", err)
			return 1
		}
	default:
	}
	return 0
}

func (s *server) log(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		fmt.Fprintf(s.stderr, format, args...)
	}
}

func (s *server) write(raw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		_, _ = s.stdout.Write(raw)
	}
}

func (s *server) respond(r protocol.ServeResponse) {
	raw, err := json.Marshal(r)
	if err != nil {
		s.log("misbehave: encode response: %v\n", err)
		return
	}
	s.write(append(raw, '\n'))
}

// lockedStderr streams a call's stderr and keeps a copy for its error.
type lockedStderr struct {
	s   *server
	buf bytes.Buffer
}

func (l *lockedStderr) Write(p []byte) (int, error) {
	l.buf.Write(p)
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.closed {
		return len(p), nil
	}
	return l.s.stderr.Write(p)
}

func (s *server) handle(line []byte) {
	var sr protocol.ServeRequest
	if err := json.Unmarshal(line, &sr); err != nil {
		s.log("misbehave: bad request line, ignored: %v\n", err)
		return
	}
	var args []string
	switch sr.Call {
	case protocol.CallInit:
	case protocol.CallState:
		args = []string{"state"}
	case protocol.CallAction:
		args = []string{"action", sr.Action}
	default:
		s.respond(protocol.ServeResponse{ID: sr.ID, Error: fmt.Sprintf("unknown call %q", sr.Call)})
		return
	}
	raw, err := json.Marshal(sr.Request)
	if err != nil {
		s.respond(protocol.ServeResponse{ID: sr.ID, Error: err.Error()})
		return
	}
	var out bytes.Buffer
	errOut := &lockedStderr{s: s}
	code := call(s.ctx, args, s.env, raw, &out, errOut)
	if s.ctx.Err() != nil {
		return // the server is going down: in-flight calls get no answer
	}
	switch {
	case code == ExitCode:
		select { // the server dies with its calls in flight
		case s.died <- code:
		default:
		}
	case code != 0:
		s.respond(protocol.ServeResponse{ID: sr.ID, Error: fmt.Sprintf("exit status %d: %s", code, bytes.TrimSpace(errOut.buf.Bytes()))})
	case sr.Call == protocol.CallAction:
		s.respond(protocol.ServeResponse{ID: sr.ID, Result: json.RawMessage("{}"), Stdout: out.String()})
	case json.Valid(out.Bytes()) && bytes.HasPrefix(bytes.TrimSpace(out.Bytes()), []byte("{")):
		s.respond(protocol.ServeResponse{ID: sr.ID, Result: bytes.TrimSpace(out.Bytes())})
	default: // garbage or huge output: straight onto the wire
		s.write(out.Bytes())
	}
}
