package enginecall

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/client"
)

// maxRefusal bounds what is read of an engine's refusal to upgrade.
const maxRefusal = 64 << 10

// Refused is an engine's answer other than the upgrade asked for, with its
// body: the client library drops the body ("unable to upgrade to tcp,
// received 409"), and it is where the engine says why.
type Refused struct {
	Status int
	Body   []byte
}

func (e *Refused) Error() string {
	return fmt.Sprintf("the engine answered %d %s: %s", e.Status, http.StatusText(e.Status), bytes.TrimSpace(e.Body))
}

// Upgrade sends method path (relative to the engine's API, version
// prefix added) asking for the connection to be upgraded to the raw stream
// (container attach, exec start), as the client library's hijack does, but
// with the handshake bounded: the client library reads the answer with no
// deadline (client/hijack.go setupHijackConn), so a hung engine would hold
// the caller for ever. The handshake obeys ctx and bound (*HungError when
// the bound ends it); the stream after it is the caller's to bound. An
// answer other than 101 is a *Refused.
func Upgrade(ctx context.Context, cli *client.Client, bound time.Duration, call, target, method, path, contentType string, body []byte) (types.HijackedResponse, error) {
	if bound <= 0 {
		bound = DefaultBound
	}
	daemon := cli.DaemonHost()
	u, err := client.ParseHostURL(daemon)
	if err != nil {
		return types.HijackedResponse{}, fmt.Errorf("engine address %q: %w", daemon, err)
	}
	// A placeholder host for a local socket, as the client library sends.
	host, base := u.Host, strings.TrimSuffix(u.Path, "/")
	if u.Scheme == "unix" || u.Scheme == "npipe" {
		host, base = client.DummyHost, ""
	}
	if v := cli.ClientVersion(); v != "" {
		base += "/v" + v
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+host+base+path, bytes.NewReader(body))
	if err != nil {
		return types.HijackedResponse{}, err
	}
	if body == nil {
		req.Body = http.NoBody
	}
	req.Host = host
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")

	conn, err := Get(ctx, daemon, call+" (connect)", target, bound, func(ctx context.Context) (net.Conn, error) {
		return cli.Dialer()(ctx)
	})
	if err != nil {
		return types.HijackedResponse{}, fmt.Errorf("connect to the engine at %s: %w", daemon, err)
	}
	_ = conn.SetDeadline(time.Now().Add(bound))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (types.HijackedResponse, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return types.HijackedResponse{}, context.Cause(ctx)
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			return types.HijackedResponse{}, &HungError{Host: daemon, Call: call, Target: target, Bound: bound}
		}
		return types.HijackedResponse{}, err
	}
	if err := req.Write(conn); err != nil {
		return fail(fmt.Errorf("send %s request: %w", call, err))
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(fmt.Errorf("read %s answer: %w", call, err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxRefusal))
		resp.Body.Close()
		return fail(&Refused{Status: resp.StatusCode, Body: b})
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
