package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/project"
	"github.com/gcompose/gcompose/core/secret"
)

// Secrets (docs/secrets.md): run() makes one redactor per run and wraps
// stdout and stderr with it, so nothing printed (plans, progress, errors,
// adapter stderr echoes, notes) shows a secret value; every secret learnt
// during the run (${secret.*} values, adapter secret fields, credentials
// sent to adapters, values decrypted from the state) is added to it by the
// guards of core/project, which every run of the engine goes through.

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

// maskPlan returns a copy of pl for printing: every config value and
// planned output holding a secret shows as (sensitive) as a whole, and
// secrets in its notes (errors quoting a config) are masked.
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
		sc.Planned = red.MaskMap(s.Planned)
		// A terminal's plan wraps these lines at its width: a secret split
		// across lines is past what the output's redactor recognises.
		sc.Error, sc.Reason, sc.Drift = red.Redact(s.Error), red.Redact(s.Reason), red.Redact(s.Drift)
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

func showSecretsFlag() cli.Flag {
	return &cli.BoolFlag{Name: "show-secrets", Usage: "print secret values in clear (needs the state key)"}
}

// loadShown loads a document for state show: decrypted when the key is
// given; without it, encrypted values stay sealed (and are masked), unless
// --show-secrets asks for them, which then fails naming what is needed.
func loadShown(c *cli.Context, st *project.State, app string) (*project.Document, error) {
	codec, err := stateCodec(c)
	if err != nil {
		return nil, err
	}
	return st.LoadShown(c.Context, app, codec, redactor(c), !c.Bool("show-secrets"))
}

// showResource prints a resource of the state as JSON: every value holding
// a secret (or still encrypted) as (sensitive), or, with --show-secrets,
// everything in clear, past the output redactor.
func showResource(c *cli.Context, r *project.Resource) error {
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
func unsealDoc(c *cli.Context, app string, doc *project.Document) (*project.Document, error) {
	codec, err := stateCodec(c)
	if err != nil {
		return nil, err
	}
	return (&secret.Store{Codec: codec, Redactor: redactor(c), KeepSealed: true}).Unseal(app, doc)
}
