package resolve

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gcompose/gcompose/core/expr"
	"github.com/gcompose/gcompose/core/source"
)

// lookupSecret resolves ${secret.NAME}: the value of the secret declared
// under secrets.NAME, read now from its environment variable or file.
func (rv *resolver) lookupSecret(p []expr.Step) (any, bool, string, error) {
	if len(p) != 2 || p[1].IsIndex {
		return nil, false, "", fmt.Errorf("a secret reference is ${secret.NAME}")
	}
	name := p[1].Name
	if v, ok := rv.secrets[name]; ok {
		return v, true, "", nil
	}
	s, ok := rv.app.Secrets[name]
	if !ok {
		return nil, false, "", fmt.Errorf("no secret named %q is declared%s: declare it under secrets: (%s: {env: VARIABLE} or {file: PATH})",
			name, source.Suggest(name, slices.Sorted(maps.Keys(rv.app.Secrets))), name)
	}
	var val string
	switch {
	case s.Env != "":
		v, ok := rv.opts.Env(s.Env)
		if !ok {
			return nil, false, "", fmt.Errorf("secret %s is read from environment variable %s, which is not set (declared at %s)", name, s.Env, s.Pos)
		}
		val = v
	case s.File != "":
		path := s.File
		if !filepath.IsAbs(path) && s.Pos.File != "" {
			path = filepath.Join(filepath.Dir(s.Pos.File), path)
		}
		b, err := rv.opts.ReadFile(path)
		if err != nil {
			return nil, false, "", fmt.Errorf("secret %s cannot be read from its file (declared at %s): %v", name, s.Pos, err)
		}
		val = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	default:
		return nil, false, "", fmt.Errorf("secret %s says neither env nor file", name)
	}
	if rv.secrets == nil {
		rv.secrets = map[string]string{}
	}
	rv.secrets[name] = val
	return val, true, "", nil
}
