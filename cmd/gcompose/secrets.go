package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/adapter"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/secret"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/protocol"
)

// Secrets (docs/secrets.md): run() makes one redactor per run and wraps
// stdout and stderr with it, so nothing printed (plans, progress, errors,
// adapter stderr echoes, notes) shows a secret value; every secret learnt
// during the run (${secret.*} values, adapter secret fields, credentials
// sent to adapters, values decrypted from the state) is added to it.

// redactorKey is where the run's redactor lives in cli.App.Metadata.
const redactorKey = "gcompose.redactor"

// redactOutput wraps stdout and stderr with a new redactor. flush writes
// what the writers held back; call it before the process ends.
func redactOutput(stdout, stderr io.Writer) (red *secret.Redactor, out, errw io.Writer, flush func()) {
	red = secret.NewRedactor()
	ow, ew := red.Writer(stdout), red.Writer(stderr)
	return red, ow, ew, func() { ow.Flush(); ew.Flush() }
}

// redactor returns the run's redactor (a fresh one when the app was built
// without run(), which only tests do).
func redactor(c *cli.Context) *secret.Redactor {
	if r, ok := c.App.Metadata[redactorKey].(*secret.Redactor); ok {
		return r
	}
	r := secret.NewRedactor()
	if c.App.Metadata == nil {
		c.App.Metadata = map[string]any{}
	}
	c.App.Metadata[redactorKey] = r
	return r
}

// registerSecrets adds the values of the descriptor's ${secret.*} to the
// run's redactor.
func registerSecrets(c *cli.Context, values map[string]string) {
	red := redactor(c)
	for _, v := range values {
		red.Add(v)
	}
}

func stateKeyFlag() cli.Flag {
	return &cli.StringFlag{Name: "state-key-file", EnvVars: []string{secret.EnvKeyFile},
		Usage: "`FILE` holding the key (base64 of 32 bytes) that encrypts secrets in the state; or set " + secret.EnvKey + " or " + secret.EnvPassphrase}
}

// stateCodec is the codec of the state key given (nil: none given).
func stateCodec(c *cli.Context) (*secret.Codec, error) {
	codec, err := secret.CodecFromEnv(os.LookupEnv, c.String("state-key-file"))
	if err != nil {
		return nil, withCode(exitError, err)
	}
	return codec, nil
}

// openSecretStore opens the state store wrapped so that secrets are
// encrypted in it and decrypted (and learnt by the redactor) on load. A
// deploy whose descriptor uses secrets needs a key: refuse before anything
// changes rather than fail after an action.
func openSecretStore(c *cli.Context, p *project, writes bool) (state.Store, error) {
	codec, err := stateCodec(c)
	if err != nil {
		return nil, err
	}
	if codec == nil && writes && p != nil && len(p.resolved.Secrets) > 0 {
		names := make([]string, 0, len(p.resolved.Secrets))
		for n := range p.resolved.Secrets {
			names = append(names, n)
		}
		return nil, withCode(exitError, fmt.Errorf("the descriptor uses secrets (%s), which the state stores only encrypted: %s", strings.Join(sorted(names), ", "), secret.KeyHelp))
	}
	st, err := openStore(c)
	if err != nil {
		return nil, err
	}
	return &secret.Store{Store: st, Codec: codec, Redactor: redactor(c)}, nil
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// maskPlan returns a copy of pl for printing: every config value holding a
// secret shows as (sensitive) as a whole.
func maskPlan(c *cli.Context, pl *plan.Plan) *plan.Plan {
	red := redactor(c)
	if pl == nil || red.Len() == 0 {
		return pl
	}
	cp := *pl
	cp.Steps = make([]*plan.Step, len(pl.Steps))
	for i, s := range pl.Steps {
		sc := *s
		sc.Before = red.MaskMap(s.Before)
		sc.After = red.MaskMap(s.After)
		sc.Config = red.MaskMap(s.Config)
		if s.Answer != nil {
			// The answer's outputs and opaque staleState may echo what the
			// adapter was given; a saved plan is asked again anyway.
			a := *s.Answer
			a.State = red.MaskMap(s.Answer.State)
			if len(a.StaleState) > 0 {
				a.StaleState = json.RawMessage(red.Redact(string(a.StaleState)))
				if !json.Valid(a.StaleState) {
					a.StaleState = nil
				}
			}
			sc.Answer = &a
		}
		cp.Steps[i] = &sc
	}
	return &cp
}

// credentialEnv looks up the environment variables adapters ask for
// (RequestExt.Env); the values of credentials among them (YAGNA_APPKEY,
// names holding KEY, TOKEN, SECRET, PASSWORD, PASSPHRASE, CREDENTIAL) become
// secrets of the run.
func credentialEnv(red *secret.Redactor) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := os.LookupEnv(name)
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

// secretFieldAdapters makes the config fields an adapter's init marks
// secret (InitExt.SecretFields) secrets of the run before the adapter is
// called (so before the plan is printed), and refuses an action whose
// container arguments would carry a secret (docker inspect shows them).
type secretFieldAdapters struct {
	plan.Adapters
	client initer
	red    *secret.Redactor
}

// initer answers an adapter's init (cached): *adapter.Client.
type initer interface {
	Init(ctx context.Context, image, resourceName string) (*adapter.Info, error)
}

func withSecretFields(c *cli.Context, a plan.Adapters, client initer) plan.Adapters {
	return &secretFieldAdapters{Adapters: a, client: client, red: redactor(c)}
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
	if s, ok := v.(string); ok {
		a.red.Add(s)
		return
	}
	if b, err := json.Marshal(v); err == nil {
		a.red.Add(string(b))
	}
}

func (a *secretFieldAdapters) State(ctx context.Context, c plan.Call, desired string) (*protocol.StateResult, error) {
	a.learn(ctx, c)
	return a.Adapters.State(ctx, c, desired)
}

func (a *secretFieldAdapters) Action(ctx context.Context, c plan.Call, act protocol.ActionSpec, stale json.RawMessage) (*plan.ActionOutcome, error) {
	a.learn(ctx, c)
	for _, arg := range append([]string{act.Image, act.Entrypoint}, act.Args...) {
		if a.red.Contains(arg) {
			return nil, fmt.Errorf("%s: the adapter asked to run action %q with a secret in its container arguments, which docker inspect and ps show: refused (adapters get secrets on stdin only)", c.Name, act.Name)
		}
	}
	return a.Adapters.Action(ctx, c, act, stale)
}

func showSecretsFlag() cli.Flag {
	return &cli.BoolFlag{Name: "show-secrets", Usage: "print secret values in clear (needs the state key)"}
}

// loadShown loads a document for state show: decrypted when the key is
// given; without it, encrypted values stay sealed (and are masked), unless
// --show-secrets asks for them, which then fails naming what is needed.
func loadShown(c *cli.Context, st state.Store, app string) (*state.Document, error) {
	codec, err := stateCodec(c)
	if err != nil {
		return nil, err
	}
	s := &secret.Store{Store: st, Codec: codec, Redactor: redactor(c), KeepSealed: !c.Bool("show-secrets")}
	return s.Load(c.Context, app)
}

// showResource prints a resource of the state as JSON: every value holding
// a secret (or still encrypted) as (sensitive), or, with --show-secrets,
// everything in clear, past the output redactor.
func showResource(c *cli.Context, r *state.Resource) error {
	w := c.App.Writer
	if c.Bool("show-secrets") {
		if u, ok := w.(interface{ Unwrap() io.Writer }); ok {
			w = u.Unwrap()
		}
	} else {
		red := redactor(c)
		m := *r
		m.Config, m.State, m.Identity = red.MaskMap(r.Config), red.MaskMap(r.State), red.MaskMap(r.Identity)
		r = &m
	}
	if err := printJSON(w, r); err != nil {
		return withCode(exitError, err)
	}
	return nil
}

// unsealDoc decrypts a document read without openSecretStore (diff of a
// state file or of another backend) with the state key, when given; without
// a key, envelopes stay (they show as (sensitive)).
func unsealDoc(c *cli.Context, app string, doc *state.Document) (*state.Document, error) {
	codec, err := stateCodec(c)
	if err != nil {
		return nil, err
	}
	return (&secret.Store{Codec: codec, Redactor: redactor(c), KeepSealed: true}).Unseal(app, doc)
}
