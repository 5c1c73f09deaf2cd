package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// attach opens the stdin/stdout/stderr stream of a container, like the
// client library's ContainerAttach, but keeps the engine's answer when it
// refuses the upgrade: the library reports only "unable to upgrade to tcp,
// received 409", and the body it drops is where the engine says why
// (Podman, which starts the container's runtime at attach, puts the
// runtime's refusal there).
func (r *Runner) attach(ctx context.Context, id string) (types.HijackedResponse, error) {
	q := url.Values{"stream": {"1"}, "stdin": {"1"}, "stdout": {"1"}, "stderr": {"1"}}
	hr, err := enginecall.Upgrade(ctx, r.cli, r.opts.EngineTimeout, "ContainerAttach", shortID(id),
		http.MethodPost, "/containers/"+url.PathEscape(id)+"/attach?"+q.Encode(), "text/plain", nil)
	if refused, ok := errors.AsType[*enginecall.Refused](err); ok {
		return hr, engineError(refused.Status, refused.Body)
	}
	return hr, err
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
