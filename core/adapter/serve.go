package adapter

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/protocol"
)

// Serve mode: an adapter whose init answer says gcompose.serve runs as one
// long-lived container (args ["serve"]) per image, network and set of
// mounts; every state and action call of the run is one JSON line on its
// stdin ({id, call, action, args, request}) answered by one line on its
// stdout ({id, result | error, stdout}), many in flight at once. A server
// that dies is restarted once; the calls it had in flight fail with the
// reason and its stderr tail (nothing is lost: a failed call is a failed
// call, as with a one-shot container, and the engine records it so).

// SessionStarter starts long-lived containers; *runner.Runner is one. A
// Runner that does not implement it never serves.
type SessionStarter interface {
	Start(ctx context.Context, s runner.Spec) (*runner.Session, error)
}

// serveRestarts is how many times a dead server is replaced in one run.
const serveRestarts = 1

// slot holds the server of one key across restarts.
type slot struct {
	mu       sync.Mutex
	srv      *server
	restarts int
	lastErr  error
}

// server is one running serve-mode container and its calls in flight.
type server struct {
	image string // as the user wrote it, for messages
	sess  *runner.Session
	limit int64

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*inFlight
	dead    chan struct{}
	deadErr error
}

// inFlight is one call waiting for its lines: interim identity reports,
// then the response. gone is closed when the caller stops listening, so
// that the reader never blocks on a call that gave up.
type inFlight struct {
	lines chan protocol.ServeResponse
	gone  chan struct{}
}

// serveKey identifies the server a call can go to.
func serveKey(info *Info, network string, mounts []runner.Mount) string {
	parts := make([]string, 0, len(mounts))
	for _, m := range mounts {
		parts = append(parts, fmt.Sprintf("%s:%s:%t", m.HostPath, m.ContainerPath, m.ReadOnly))
	}
	sort.Strings(parts)
	return info.ImageID + "|" + network + "|" + strings.Join(parts, ",")
}

// canServe says whether a call may go to a server: the adapter offers it,
// serving is not disabled, and the call runs the resource's own image with
// its own entrypoint (another image or entrypoint needs its own container).
func (c *Client) canServe(info *Info, spec protocol.ActionSpec) bool {
	if c.opts.NoServe || !info.Ext || !info.Init.Gcompose.Serve {
		return false
	}
	if _, ok := c.opts.Runner.(SessionStarter); !ok {
		return false
	}
	return (spec.Image == "" || spec.Image == info.ImageRef || spec.Image == info.ImageID) && spec.Entrypoint == ""
}

// serveCall sends one call to the server for (image, network, mounts),
// starting it (or restarting it once) as needed, and returns the response.
func (c *Client) serveCall(ctx context.Context, t Target, info *Info, network string, mounts []runner.Mount, sr protocol.ServeRequest, call string, report func(map[string]any)) (*protocol.ServeResponse, string, error) {
	srv, err := c.serverOf(ctx, c.slotOf(serveKey(info, network, mounts)), t, info, network, mounts)
	if err != nil {
		return nil, "", err
	}
	timeout := c.opts.Timeout
	if timeout <= 0 {
		timeout = runner.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := srv.call(ctx, sr, report)
	if err != nil {
		what := fmt.Sprintf("adapter %s call %s for %s (served)", t.Image, call, t.Name)
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return nil, "", fmt.Errorf("%s timed out after %s: %w; %s", what, timeout, err, runner.FormatTail(srv.sess.StderrTail()))
		case errors.Is(err, errServerDied):
			return nil, "", fmt.Errorf("%s failed: %w; %s", what, err, runner.FormatTail(srv.sess.StderrTail()))
		default:
			return nil, "", fmt.Errorf("%s: %w", what, err)
		}
	}
	return resp, srv.sess.StderrTail(), nil
}

// slotOf is the slot of a server key, made on first use.
func (c *Client) slotOf(key string) *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	sl, ok := c.slots[key]
	if !ok {
		sl = &slot{}
		c.slots[key] = sl
	}
	return sl
}

// serverOf returns the live server of a slot, starting one if there is none
// and replacing a dead one at most serveRestarts times.
func (c *Client) serverOf(ctx context.Context, sl *slot, t Target, info *Info, network string, mounts []runner.Mount) (*server, error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.srv != nil {
		select {
		case <-sl.srv.dead:
			sl.lastErr = sl.srv.deadErr
			if sl.restarts >= serveRestarts {
				return nil, plan.Named(t.Name, fmt.Errorf("adapter %s server died again and is not restarted: %w", t.Image, sl.lastErr))
			}
			sl.restarts++
			c.log.Warn("adapter server died; restarting it", "image", t.Image, "err", sl.lastErr)
			sl.srv = nil
		default:
			return sl.srv, nil
		}
	}
	sess, err := c.opts.Runner.(SessionStarter).Start(ctx, runner.Spec{
		Image: info.ImageID, Args: []string{protocol.ServeArg}, Mounts: mounts, Network: network,
		App: t.App, Resource: "serve " + t.Image, Call: protocol.ServeArg, Stderr: c.stderr(),
	})
	if err != nil {
		return nil, named(t.Image, err)
	}
	limit := c.opts.StdoutLimit
	if limit <= 0 {
		limit = runner.DefaultStdoutLimit
	}
	srv := &server{image: t.Image, sess: sess, limit: limit, pending: map[uint64]*inFlight{}, dead: make(chan struct{})}
	go srv.read(c.v)
	sl.srv = srv
	return srv, nil
}

var errServerDied = errors.New("adapter server ended")

// read dispatches response lines to the calls waiting for them until the
// server's stdout ends or breaks the protocol; then the server is dead and
// every call in flight fails.
func (s *server) read(v Validator) {
	sc := bufio.NewScanner(s.sess.Stdout())
	sc.Buffer(make([]byte, 0, 64<<10), int(s.limit)+1)
	var err error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var resp protocol.ServeResponse
		if cerr := checkJSON(line); cerr != nil {
			err = fmt.Errorf("response line %s: %w", snippet(line, 120), cerr)
			break
		}
		if mv, ok := v.(interface {
			ValidateMessage(name string, data []byte) error
		}); ok {
			if verr := mv.ValidateMessage(protocol.MsgServeResponse, line); verr != nil {
				err = fmt.Errorf("response line invalid: %w", verr)
				break
			}
		}
		if uerr := json.Unmarshal(line, &resp); uerr != nil {
			err = fmt.Errorf("response line: %w", uerr)
			break
		}
		s.mu.Lock()
		f, ok := s.pending[resp.ID]
		if !resp.Interim() {
			delete(s.pending, resp.ID)
		}
		s.mu.Unlock()
		if ok {
			select {
			case f.lines <- resp:
			case <-f.gone:
			}
		}
		// A line of a call that gave up (timeout, cancel) is dropped.
	}
	if err == nil {
		err = sc.Err()
	}
	if errors.Is(err, bufio.ErrTooLong) {
		err = fmt.Errorf("refused a response line longer than %d bytes (the limit)", s.limit)
	}
	if err == nil {
		err = errors.New("its container exited")
	}
	s.mu.Lock()
	s.deadErr = fmt.Errorf("%w: %v", errServerDied, err)
	s.pending = nil
	close(s.dead)
	s.mu.Unlock()
	// A server that broke the protocol is not trusted with more calls.
	_ = s.sess.Kill(context.Background())
}

// call sends one request and waits for its response, handing each interim
// identity report to report (in this goroutine, in order) as it comes.
func (s *server) call(ctx context.Context, sr protocol.ServeRequest, report func(map[string]any)) (*protocol.ServeResponse, error) {
	f := &inFlight{lines: make(chan protocol.ServeResponse, 8), gone: make(chan struct{})}
	defer close(f.gone)
	s.mu.Lock()
	if s.pending == nil {
		s.mu.Unlock()
		<-s.dead
		return nil, s.deadErr
	}
	s.next++
	sr.ID = s.next
	sr.Stream = report != nil
	s.pending[sr.ID] = f
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		if s.pending != nil {
			delete(s.pending, sr.ID)
		}
		s.mu.Unlock()
	}

	line, err := json.Marshal(sr)
	if err != nil {
		forget()
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if _, err := s.sess.Write(append(line, '\n')); err != nil {
		forget()
		select {
		case <-s.dead:
			return nil, s.deadErr
		case <-time.After(time.Second):
			return nil, fmt.Errorf("%w: write request: %v", errServerDied, err)
		}
	}
	// take handles one line; it says whether that was the response.
	take := func(resp protocol.ServeResponse) bool {
		if !resp.Interim() {
			return true
		}
		if report != nil {
			report(resp.Identity)
		}
		return false
	}
	for {
		select {
		case resp := <-f.lines:
			if take(resp) {
				return &resp, nil
			}
		case <-s.dead:
			// Reports the server made before it died still count.
			for {
				select {
				case resp := <-f.lines:
					if take(resp) {
						return &resp, nil
					}
					continue
				default:
				}
				return nil, s.deadErr
			}
		case <-ctx.Done():
			forget()
			return nil, ctx.Err()
		}
	}
}

// Close stops every adapter server of the Client, letting each finish what
// it has in flight (until ctx is done), and removes their containers. Call
// it when the run ends; a Client without servers has nothing to do.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	slots := make([]*slot, 0, len(c.slots))
	for _, sl := range c.slots {
		slots = append(slots, sl)
	}
	c.slots = map[string]*slot{}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, runner.SessionGrace)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(slots))
	for i, sl := range slots {
		sl.mu.Lock()
		srv := sl.srv
		sl.srv = nil
		sl.mu.Unlock()
		if srv == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = srv.sess.Close(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
