package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// maxErrorBody bounds what is read of an engine's refusal.
const maxErrorBody = 64 << 10

// attach opens the stdin/stdout/stderr stream of a container, like the
// client library's ContainerAttach, but keeps the engine's answer when it
// refuses the upgrade: the library reports only "unable to upgrade to tcp,
// received 409", and the body it drops is where the engine says why
// (Podman, which starts the container's runtime at attach, puts the
// runtime's refusal there).
func (r *Runner) attach(ctx context.Context, id string) (types.HijackedResponse, error) {
	host, base, err := endpoint(r.cli.DaemonHost())
	if err != nil {
		return types.HijackedResponse{}, err
	}
	bound := r.opts.EngineTimeout
	hung := &enginecall.HungError{Host: r.cli.DaemonHost(), Call: "ContainerAttach", Target: shortID(id), Bound: bound}
	conn, err := enginecall.Get(ctx, r.cli.DaemonHost(), "ContainerAttach (connect)", shortID(id), bound, func(ctx context.Context) (net.Conn, error) {
		return r.cli.Dialer()(ctx)
	})
	if err != nil {
		return types.HijackedResponse{}, fmt.Errorf("connect to the engine at %s: %w", r.cli.DaemonHost(), err)
	}
	// The handshake obeys ctx and EngineTimeout (an engine that takes the
	// connection and never answers is hung); the stream after it is the
	// caller's to bound.
	_ = conn.SetDeadline(time.Now().Add(bound))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (types.HijackedResponse, error) {
		conn.Close()
		if ctx.Err() != nil {
			return types.HijackedResponse{}, context.Cause(ctx)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return types.HijackedResponse{}, hung
		}
		return types.HijackedResponse{}, err
	}

	q := url.Values{"stream": {"1"}, "stdin": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	if v := r.cli.ClientVersion(); v != "" {
		base += "/v" + v
	}
	path := base + "/containers/" + url.PathEscape(id) + "/attach?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+host+path, http.NoBody)
	if err != nil {
		return fail(err)
	}
	req.Host = host
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if err := req.Write(conn); err != nil {
		return fail(fmt.Errorf("send attach request: %w", err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(fmt.Errorf("read attach answer: %w", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		return fail(engineError(resp.StatusCode, body))
	}
	if !stop() {
		return fail(context.Cause(ctx))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	// The reader keeps what the engine sent right after its answer.
	return types.HijackedResponse{Conn: conn, Reader: br}, nil
}

// endpoint is the Host header and the base path of the engine's API: a
// placeholder host for a local socket, as the client library sends.
func endpoint(daemonHost string) (host, base string, err error) {
	u, err := client.ParseHostURL(daemonHost)
	if err != nil {
		return "", "", fmt.Errorf("engine address %q: %w", daemonHost, err)
	}
	switch u.Scheme {
	case "unix", "npipe":
		return client.DummyHost, "", nil
	}
	return u.Host, strings.TrimSuffix(u.Path, "/"), nil
}

// engineError is an engine's refusal with its message (Docker answers
// {"message": ...}; Podman adds "cause"), classified by status so that
// errdefs checks (not found, conflict) work on it.
func engineError(status int, body []byte) error {
	var msg struct {
		Message string `json:"message"`
		Cause   string `json:"cause"`
	}
	text := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &msg) == nil && msg.Message != "" {
		text = msg.Message
		if msg.Cause != "" && !strings.Contains(msg.Message, msg.Cause) {
			text += " (" + msg.Cause + ")"
		}
	}
	if text == "" {
		text = "no explanation given"
	}
	var kind error
	switch status {
	case http.StatusNotFound:
		kind = cerrdefs.ErrNotFound
	case http.StatusConflict:
		kind = cerrdefs.ErrConflict
	case http.StatusBadRequest:
		kind = cerrdefs.ErrInvalidArgument
	default:
		kind = cerrdefs.ErrUnknown
	}
	return &statusError{status: status, text: text, kind: kind}
}

// statusError is an engine answer other than the upgrade asked for.
type statusError struct {
	status int
	text   string
	kind   error
}

func (e *statusError) Error() string {
	return fmt.Sprintf("the engine answered %d %s: %s", e.status, http.StatusText(e.status), e.text)
}

func (e *statusError) Unwrap() error { return e.kind }
