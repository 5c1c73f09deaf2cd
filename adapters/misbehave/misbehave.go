// Package misbehave is an adapter that breaks the protocol on demand, so
// the engine's tests can cover every error path against a real container.
//
// State and action calls misbehave as the resource's config says:
//
//	mode:     ok (default) | hang | garbage | wrong-schema | exit-nonzero |
//	          huge-output | lying | slow | bad-identity | refuse | switch
//	on:       state (default) | action   -- which call misbehaves
//	when:     always (default) | deploy | destroy
//	sleep_ms: for slow (default 1000)
//	message:  for exit-nonzero and refuse (default "misbehaving on purpose")
//	bytes:    for huge-output (default 64 MiB)
//
// With on: action, the state call answers STALE with one action,
// "misbehave", which does the misbehaving. An action that succeeds (slow,
// garbage, bad-identity) reports the identity {"misbehave_done": true}; the
// state call answers VALID once the persisted identity carries it, so the
// re-query after the action is VALID when the engine persists identities at
// once as the protocol asks.
//
// init has no config, so init misbehaves by the environment variable
// EnvInit (and EnvSleepMS for slow), baked into a derived image so that
// its image ID — the key of gcompose's init cache — differs from the plain
// image's: see InitVariantDockerfile. The init mode "serve" offers serve
// mode, whose calls misbehave by config like one-shot ones (see serve.go:
// exit-nonzero kills the whole server, garbage breaks the framing, hang
// leaves one request unanswered).
package misbehave

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/protocol"
)

// Modes of state and action calls (config "mode").
const (
	ModeOK          = "ok"
	ModeHang        = "hang"         // never answers (ignores SIGTERM as PID 1)
	ModeGarbage     = "garbage"      // non-JSON on stdout (free text in an action: legal)
	ModeWrongSchema = "wrong-schema" // valid JSON, wrong shape (in an action: a malformed identity line)
	ModeExitNonzero = "exit-nonzero" // exit 3 with a message on stderr
	ModeHugeOutput  = "huge-output"  // 64 MiB on stdout
	ModeLying       = "lying"        // STALE again after its action ran
	ModeSlow        = "slow"         // sleeps sleep_ms, then answers normally
	ModeBadIdentity = "bad-identity" // an action's identity line is not JSON
	// ModeRefuse answers the state call STALE create with gcompose.refuse
	// {message}: the change cannot succeed, plan must fail it.
	ModeRefuse = "refuse"
	// ModeSwitch answers STALE create with one action named
	// "misbehave-" + the value of EnvAction sent in the request (init
	// variant InitEnv asks for it): a test changes it between a saved
	// plan and its apply, so that the adapter answers other actions at
	// apply than at plan.
	ModeSwitch = "switch"
)

// Init modes (environment variable EnvInit): the state-call modes hang,
// garbage, wrong-schema, exit-nonzero, huge-output and slow, plus:
const (
	// InitWrongProtocol answers with a gcompose protocol version this build
	// does not speak (Version + 1).
	InitWrongProtocol = "wrong-protocol"
	// InitDeployster answers like a plain Deployster adapter (no gcompose
	// member); its state and action calls then fail if their request
	// carries a gcompose member, which checks the compatibility rule.
	InitDeployster = "deployster"
	// InitServe offers serve mode; the served calls then misbehave by
	// config as one-shot ones do (see serve).
	InitServe = "serve"
	// InitEnv asks for EnvAction in the init answer (gcompose.env), so
	// that state and action calls carry its value.
	InitEnv = "env"
)

// Environment variables read by init (and, for InitDeployster, by every call).
const (
	EnvInit    = "GCOMPOSE_MISBEHAVE_INIT"
	EnvSleepMS = "GCOMPOSE_MISBEHAVE_SLEEP_MS"
	// EnvAction names the action of ModeSwitch (read from the request).
	EnvAction = "GCOMPOSE_MISBEHAVE_ACTION"
)

// Action names.
const (
	ActMisbehave = "misbehave"
	ActNoop      = "noop"
)

// DoneKey is the identity key a succeeding misbehave action reports.
const DoneKey = "misbehave_done"

// DefaultHugeBytes is what huge-output writes unless config bytes says otherwise.
const DefaultHugeBytes = 64 << 20

// ExitCode is the status of exit-nonzero.
const ExitCode = 3

// Image is the plain image the init variants derive from.
const Image = "gcompose/misbehave-adapter:dev"

// InitVariantDockerfile is the Dockerfile of an image whose init misbehaves
// in the given mode (built FROM base, e.g. Image):
//
//	printf 'FROM gcompose/misbehave-adapter:dev\nENV GCOMPOSE_MISBEHAVE_INIT=hang\n' |
//	  docker build -t gcompose/misbehave-adapter:init-hang -
func InitVariantDockerfile(base, mode string) string {
	return fmt.Sprintf("FROM %s\nENV %s=%s\n", base, EnvInit, mode)
}

// Config is a misbehave resource's config.
type Config struct {
	Mode    string `json:"mode,omitempty"`
	On      string `json:"on,omitempty"`
	When    string `json:"when,omitempty"`
	SleepMS int    `json:"sleep_ms,omitempty"`
	Message string `json:"message,omitempty"`
	Bytes   int    `json:"bytes,omitempty"`
}

// ConfigSchema is the config_schema of the init answer.
func ConfigSchema() json.RawMessage {
	return json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "mode": {"enum": ["ok", "hang", "garbage", "wrong-schema", "exit-nonzero", "huge-output", "lying", "slow", "bad-identity", "refuse", "switch"]},
    "on": {"enum": ["state", "action"]},
    "when": {"enum": ["always", "deploy", "destroy"]},
    "sleep_ms": {"type": "integer", "minimum": 0},
    "message": {"type": "string"},
    "bytes": {"type": "integer", "minimum": 0}
  }
}`)
}

// Env reads the environment (os.Getenv in the image, a map in tests).
type Env func(string) string

// Run is the adapter's main without the process: it returns the exit code.
// Hanging modes block until ctx is done; Main never cancels it.
func Run(ctx context.Context, args []string, env Env, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == protocol.ServeArg {
		return serve(ctx, env, stdin, stdout, stderr)
	}
	raw, err := io.ReadAll(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "misbehave: read request: %v\n", err)
		return 1
	}
	return call(ctx, args, env, raw, stdout, stderr)
}

// call answers one call whose request is raw, as a one-shot container would.
func call(ctx context.Context, args []string, env Env, raw []byte, stdout, stderr io.Writer) int {
	m := &misbehaver{ctx: ctx, env: env, stdout: stdout, stderr: stderr}
	var req protocol.Request
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &req); err != nil {
			return m.fail("request is not JSON: %v", err)
		}
	}
	switch {
	case len(args) == 0:
		return m.init()
	case env(EnvInit) == InitDeployster && req.Gcompose != nil:
		return m.fail("received a gcompose member although init answered without one (plain Deployster adapter)")
	case len(args) == 1 && args[0] == "state":
		return m.state(req)
	case len(args) == 2 && args[0] == "action":
		return m.action(req, args[1])
	}
	return m.fail("unknown invocation %q", args)
}

// Main runs the adapter as the container's main. No signal handling: a
// hanging adapter stays hung until it is killed, like the worst real one.
func Main() {
	os.Exit(Run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

type misbehaver struct {
	ctx            context.Context
	env            Env
	stdout, stderr io.Writer
}

func (m *misbehaver) fail(format string, args ...any) int {
	fmt.Fprintf(m.stderr, "misbehave: "+format+"\n", args...)
	return 1
}

func (m *misbehaver) answer(v any) int {
	raw, err := json.Marshal(v)
	if err != nil {
		return m.fail("encode answer: %v", err)
	}
	if _, err := m.stdout.Write(append(raw, '\n')); err != nil {
		return m.fail("write answer: %v", err)
	}
	return 0
}

func (m *misbehaver) init() int {
	mode := m.env(EnvInit)
	sleep, _ := strconv.Atoi(m.env(EnvSleepMS))
	res := protocol.InitResult{
		ConfigSchema: ConfigSchema(),
		StateAction:  protocol.ActionSpec{Args: []string{"state"}},
		Gcompose:     &protocol.InitExt{Protocol: protocol.Version},
	}
	switch mode {
	case "", ModeOK:
	case InitDeployster:
		res.Gcompose = nil
	case InitServe:
		res.Gcompose.Serve = true
	case InitEnv:
		res.Gcompose.Env = []string{EnvAction}
	case InitWrongProtocol:
		res.Gcompose.Protocol = protocol.Version + 1
	case ModeSlow:
		if code, done := m.sleep(sleep); done {
			return code
		}
	case ModeHang, ModeGarbage, ModeWrongSchema, ModeExitNonzero, ModeHugeOutput:
		return m.misbehave(mode, Config{}, `{"state_action":"state","plugs":[]}`)
	default:
		return m.fail("unknown %s %q", EnvInit, mode)
	}
	return m.answer(res)
}

func (c *Config) defaults() {
	if c.Mode == "" {
		c.Mode = ModeOK
	}
	if c.On == "" {
		c.On = "state"
	}
	if c.When == "" {
		c.When = "always"
	}
	if c.SleepMS == 0 {
		c.SleepMS = 1000
	}
	if c.Message == "" {
		c.Message = "misbehaving on purpose"
	}
	if c.Bytes == 0 {
		c.Bytes = DefaultHugeBytes
	}
}

func config(req protocol.Request) (Config, error) {
	var c Config
	raw, err := json.Marshal(req.Config)
	if err != nil {
		return c, err
	}
	if string(raw) != "null" {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&c); err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
	}
	c.defaults()
	return c, nil
}

// applies says whether the configured misbehaviour is for this call.
func (c Config) applies(req protocol.Request, call string) bool {
	return c.Mode != ModeOK && c.Mode != ModeRefuse && c.Mode != ModeSwitch && c.On == call && c.whenMatches(req)
}

func (c Config) whenMatches(req protocol.Request) bool {
	switch c.When {
	case "deploy":
		return req.Desired() == protocol.Present
	case "destroy":
		return req.Desired() == protocol.Absent
	}
	return true
}

func (m *misbehaver) state(req protocol.Request) int {
	c, err := config(req)
	if err != nil {
		return m.fail("%v", err)
	}
	if c.Mode == ModeLying && c.whenMatches(req) {
		return m.answer(protocol.StateResult{Status: protocol.Stale,
			Actions:  []protocol.ActionSpec{{Name: ActNoop, Args: []string{"action", ActNoop}, Description: "does nothing, then says STALE again"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeUpdate, Reason: "lying on purpose"}})
	}
	if c.Mode == ModeRefuse && c.whenMatches(req) && req.Desired() == protocol.Present {
		return m.answer(protocol.StateResult{Status: protocol.Stale,
			Actions:  []protocol.ActionSpec{{Name: ActNoop, Args: []string{"action", ActNoop}, Description: "must never run: the state answer refuses"}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate, Reason: "refusing on purpose", Refuse: &protocol.Refusal{Message: c.Message}}})
	}
	if c.Mode == ModeSwitch && req.Desired() == protocol.Present && !done(req) {
		name := ActMisbehave + "-" + envValue(req, EnvAction)
		return m.answer(protocol.StateResult{Status: protocol.Stale,
			Actions:  []protocol.ActionSpec{{Name: name, Args: []string{"action", name}}},
			Gcompose: &protocol.StateExt{Change: protocol.ChangeCreate, Reason: "switching actions by " + EnvAction + ": " + name}})
	}
	if c.applies(req, "state") {
		if c.Mode == ModeSlow {
			if code, done := m.sleep(c.SleepMS); done {
				return code
			}
		} else {
			return m.misbehave(c.Mode, c, `{"status":"VALID","colour":"red"}`)
		}
	}
	if c.applies(req, "action") && !done(req) {
		change := protocol.ChangeCreate
		if req.Desired() == protocol.Absent {
			change = protocol.ChangeDelete
		}
		return m.answer(protocol.StateResult{Status: protocol.Stale,
			Actions:  []protocol.ActionSpec{{Name: ActMisbehave, Args: []string{"action", ActMisbehave}, Description: "misbehave: " + c.Mode}},
			Gcompose: &protocol.StateExt{Change: change, Reason: "the action will misbehave: " + c.Mode}})
	}
	return m.answer(protocol.StateResult{Status: protocol.Valid,
		State: map[string]any{"mode": c.Mode, "on": c.On}})
}

// envValue is the value gcompose sent for an environment variable ("" when none).
func envValue(req protocol.Request, name string) string {
	if req.Gcompose == nil {
		return ""
	}
	return req.Gcompose.Env[name]
}

// done: a previous misbehave action succeeded and gcompose persisted its identity.
func done(req protocol.Request) bool {
	if req.Gcompose == nil || req.Gcompose.Persisted == nil {
		return false
	}
	v, _ := req.Gcompose.Persisted.Identity[DoneKey].(bool)
	return v
}

func (m *misbehaver) action(req protocol.Request, name string) int {
	c, err := config(req)
	if err != nil {
		return m.fail("%v", err)
	}
	switch name {
	case ActNoop:
		fmt.Fprintln(m.stdout, "did nothing")
		return 0
	case ActMisbehave:
	default:
		if c.Mode != ModeSwitch || !strings.HasPrefix(name, ActMisbehave+"-") {
			return m.fail("unknown action %q", name)
		}
	}
	switch c.Mode {
	case ModeSwitch:
	case ModeSlow:
		if code, done := m.sleep(c.SleepMS); done {
			return code
		}
	case ModeGarbage:
		fmt.Fprintln(m.stdout, "\x00\x01 this is not JSON { and that is fine for an action")
	case ModeWrongSchema:
		fmt.Fprintln(m.stdout, protocol.IdentityPrefix+`["not", "an", "object"]`)
		return 0
	case ModeBadIdentity:
		fmt.Fprintln(m.stdout, protocol.IdentityPrefix+`{not json`)
		return 0
	default:
		return m.misbehave(c.Mode, c, "")
	}
	line, err := protocol.IdentityLine(map[string]any{DoneKey: true})
	if err != nil {
		return m.fail("%v", err)
	}
	fmt.Fprint(m.stdout, "misbehave action done\n"+line)
	return 0
}

// misbehave does the misbehaving common to every call; wrong is the
// wrong-shaped JSON answer of the call.
func (m *misbehaver) misbehave(mode string, c Config, wrong string) int {
	c.defaults()
	switch mode {
	case ModeHang:
		fmt.Fprintln(m.stderr, "misbehave: hanging")
		for { // a pending timer keeps the runtime from calling this a deadlock
			select {
			case <-m.ctx.Done():
				return m.fail("hang interrupted: %v", m.ctx.Err())
			case <-time.After(time.Hour):
			}
		}
	case ModeGarbage:
		fmt.Fprintln(m.stdout, "this is not JSON {")
		return 0
	case ModeWrongSchema:
		fmt.Fprintln(m.stdout, wrong)
		return 0
	case ModeExitNonzero:
		fmt.Fprintf(m.stderr, "misbehave: %s\n", c.Message)
		return ExitCode
	case ModeHugeOutput:
		return m.huge(c.Bytes)
	}
	return m.fail("mode %q cannot misbehave here", mode)
}

func (m *misbehaver) huge(n int) int {
	chunk := []byte(strings.Repeat("x", 1<<20))
	fmt.Fprintf(m.stderr, "misbehave: writing %d bytes to stdout\n", n)
	for n > 0 {
		b := chunk[:min(n, len(chunk))]
		if _, err := m.stdout.Write(b); err != nil {
			return m.fail("stdout refused after a while (as it should): %v", err)
		}
		n -= len(b)
	}
	return 0
}

// sleep waits ms milliseconds; done is true when ctx ended first.
func (m *misbehaver) sleep(ms int) (code int, done bool) {
	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return 0, false
	case <-m.ctx.Done():
		return m.fail("sleep interrupted: %v", m.ctx.Err()), true
	}
}
