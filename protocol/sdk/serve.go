package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/protocol"
)

// MaxServeLine bounds one request line in serve mode.
const MaxServeLine = 64 << 20

// serve answers JSON-line requests from stdin until it closes, each in its
// own goroutine, writing one response line per request (in completion
// order, matched by id). It returns when stdin is closed and every request
// in flight has been answered. A line that is not a request is answered
// with an error when its id can be read, and logged otherwise.
//
// stdin closes when gcompose ends its run, or dies: the server must not
// outlive it with work nobody will record. So at end of input, every call
// still in flight is cancelled (a create rolls back through its error
// path), except deletes, which may finish for up to DeleteGrace: a
// half-done delete is worse than a finished one.
func (a Adapter) serve(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	v, err := protocol.NewValidator()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inputOver, endOfInput := context.WithCancel(context.Background())
	defer endOfInput()
	w := &lineWriter{w: stdout}
	logMu := &sync.Mutex{}
	log := slog.New(slog.NewTextHandler(syncwriter.Writer{Mu: logMu, W: stderr}, nil))
	var wg sync.WaitGroup

	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 0, 64*1024), MaxServeLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var sr protocol.ServeRequest
		if err := json.Unmarshal(line, &sr); err != nil {
			var idOnly struct {
				ID *uint64 `json:"id"`
			}
			if json.Unmarshal(line, &idOnly) == nil && idOnly.ID != nil {
				w.write(protocol.ServeResponse{ID: *idOnly.ID, Error: fmt.Sprintf("bad request line: %v", err)})
			} else {
				log.Error("bad request line, ignored", "err", err)
			}
			continue
		}
		rctx, rcancel := context.WithCancel(ctx)
		if !isDelete(sr) {
			context.AfterFunc(inputOver, rcancel)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer rcancel()
			w.write(a.serveOne(rctx, v, sr, stderr, logMu, w))
		}()
	}
	endOfInput()
	grace := a.DeleteGrace
	if grace <= 0 {
		grace = DefaultDeleteGrace
	}
	stopDeletes := time.AfterFunc(grace, cancel)
	wg.Wait()
	stopDeletes.Stop()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read requests: %w", err)
	}
	if err := w.err(); err != nil {
		return fmt.Errorf("write responses: %w", err)
	}
	return nil
}

// isDelete says whether a request is a delete action: the engine's
// operation says so.
func isDelete(sr protocol.ServeRequest) bool {
	ext := sr.Request.Gcompose
	return sr.Call == protocol.CallAction && ext != nil && ext.Operation != nil && ext.Operation.Kind == protocol.ChangeDelete
}

func (a Adapter) serveOne(ctx context.Context, v *protocol.Validator, sr protocol.ServeRequest, stderr io.Writer, logMu *sync.Mutex, w *lineWriter) protocol.ServeResponse {
	resp := protocol.ServeResponse{ID: sr.ID}
	inv := invocation{call: sr.Call, action: sr.Action}
	if inv.call == protocol.CallAction && inv.action == "" && len(sr.Args) == 2 && sr.Args[0] == ActionArg {
		inv.action = sr.Args[1]
	}
	switch inv.call {
	case protocol.CallInit, protocol.CallState, protocol.CallAction, protocol.CallSweep, protocol.CallCheck:
	default:
		resp.Error = fmt.Sprintf("unknown call %q", sr.Call)
		return resp
	}
	var out bytes.Buffer
	var o io.Writer = &out
	if inv.call != protocol.CallAction {
		o = syncwriter.Writer{Mu: logMu, W: stderr}
	}
	log := newLogger(syncwriter.Writer{Mu: logMu, W: stderr}, sr.Request.Verbose).With("id", sr.ID, "resource", sr.Request.Name)
	var report func(map[string]any) error
	if sr.Stream && inv.call == protocol.CallAction {
		// The report goes out at once, not with the response: gcompose
		// records it while the action goes on, so a kill of gcompose
		// later in the action does not lose it.
		report = func(identity map[string]any) error {
			w.write(protocol.ServeResponse{ID: sr.ID, Identity: identity})
			if err := w.err(); err != nil {
				return fmt.Errorf("report identity: %w", err)
			}
			return nil
		}
	}
	result, err := a.handle(ctx, v, inv, sr.Request, o, syncwriter.Writer{Mu: logMu, W: stderr}, log, report)
	if err != nil {
		resp.Error = err.Error()
	} else if result != nil {
		resp.Result = result
	}
	resp.Stdout = out.String()
	if inv.call == protocol.CallAction && resp.Error == "" && resp.Result == nil {
		resp.Result = json.RawMessage("{}")
	}
	if resp.Error != "" && strings.TrimSpace(resp.Error) == "" {
		resp.Error = "failed"
	}
	return resp
}

// lineWriter writes whole JSON lines under a lock and remembers the first
// write error.
type lineWriter struct {
	mu    sync.Mutex
	w     io.Writer
	first error
}

func (l *lineWriter) write(r protocol.ServeResponse) {
	raw, err := json.Marshal(r)
	if err != nil { // cannot happen with these types; answer something valid anyway
		raw, _ = json.Marshal(protocol.ServeResponse{ID: r.ID, Error: "encode response: " + err.Error()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(raw, '\n')); err != nil && l.first == nil {
		l.first = err
	}
}

func (l *lineWriter) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first
}
