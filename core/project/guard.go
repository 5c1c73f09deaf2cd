package project

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/protocol"
)

// The secret guards (docs/secrets.md). Every value that is a secret of the
// run — the descriptor's ${secret.*}, the config fields adapters mark
// secret, credentials sent to adapters, values decrypted from the state —
// joins one Redactor, which masks everything printed; the state holds them
// only encrypted; and no secret goes into an adapter container's arguments.

// MissingKeyError refuses a run that would write the descriptor's secrets
// to a state that has no key to encrypt them: before anything changes,
// rather than failing after an action.
type MissingKeyError struct {
	// Secrets are the names of the descriptor's ${secret.*}.
	Secrets []string
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("the descriptor uses secrets (%s), which the state stores only encrypted: %s", strings.Join(e.Secrets, ", "), secret.KeyHelp)
}

// GuardStore wraps a state backend so that secrets are encrypted in it and
// decrypted (and learnt by red) on load. A nil codec: no key was given.
func GuardStore(st state.Store, codec *secret.Codec, red *secret.Redactor) state.Store {
	return &secret.Store{Store: st, Codec: codec, Redactor: red}
}

// CredentialEnv looks up the environment variables adapters ask for
// (RequestExt.Env) with lookup (nil: the process environment); the values
// of credentials among them (YAGNA_APPKEY, names holding KEY, TOKEN,
// SECRET, PASSWORD, PASSPHRASE, CREDENTIAL) become secrets of the run.
func CredentialEnv(lookup func(string) (string, bool), red *secret.Redactor) func(string) (string, bool) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) (string, bool) {
		v, ok := lookup(name)
		if ok && isCredential(name) {
			red.Add(v)
		}
		return v, ok
	}
}

func isCredential(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSPHRASE", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Initer answers an adapter's init (cached): *adapter.Client.
type Initer interface {
	Init(ctx context.Context, image, resourceName string) (*adapter.Info, error)
}

// GuardAdapters makes the config fields an adapter's init marks secret
// (InitExt.SecretFields) secrets of the run before the adapter is called
// (so before a plan is printed), and refuses an action whose container
// arguments would carry a secret (docker inspect shows them).
func GuardAdapters(a plan.Adapters, client Initer, red *secret.Redactor) plan.Adapters {
	return &secretFieldAdapters{Adapters: a, client: client, red: red}
}

type secretFieldAdapters struct {
	plan.Adapters
	client Initer
	red    *secret.Redactor
}

func (a *secretFieldAdapters) learn(ctx context.Context, c plan.Call) {
	info, err := a.client.Init(ctx, c.Type, c.Name)
	if err != nil || !info.Ext || info.Init.Gcompose == nil {
		return
	}
	for _, ptr := range info.Init.Gcompose.SecretFields {
		a.learnAt(c.Config, ptr)
		if c.Persisted != nil {
			a.learnAt(c.Persisted.Config, ptr)
		}
	}
}

func (a *secretFieldAdapters) learnAt(cfg map[string]any, ptr string) {
	v, ok := jsonpointer.Lookup(cfg, ptr)
	if !ok || v == nil {
		return
	}
	a.red.AddValue(v)
}

func (a *secretFieldAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	a.learn(ctx, c)
	return a.Adapters.State(ctx, c, desired)
}

// SecretArgsError refuses an action whose container arguments hold a
// secret of the run.
type SecretArgsError struct {
	Resource, Action string
}

func (e *SecretArgsError) Error() string { return e.Resource + ": " + e.Reason() }

// ResourceAddress is the resource whose action is refused.
func (e *SecretArgsError) ResourceAddress() string { return e.Resource }

// Reason is the refusal without the resource's address.
func (e *SecretArgsError) Reason() string {
	return fmt.Sprintf("the adapter asked to run action %q with a secret in its container arguments, which docker inspect and ps show: refused (adapters get secrets on stdin only)", e.Action)
}

func (a *secretFieldAdapters) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	a.learn(ctx, c)
	for _, arg := range append([]string{act.Image, act.Entrypoint}, act.Args...) {
		if a.red.Contains(arg) {
			return nil, &SecretArgsError{Resource: c.Name, Action: act.Name}
		}
	}
	return a.Adapters.Action(ctx, c, act, stale)
}
