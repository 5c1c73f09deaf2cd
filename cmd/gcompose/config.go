package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/gcompose/gcompose/core/plugpath"
)

// defaultConfigFile is read when present, so a team commits where its state
// lives once instead of repeating --state in every command and CI job.
const defaultConfigFile = ".gcompose/config.yaml"

// fileConfig is the config file: settings a flag or environment variable
// would otherwise give. A flag or variable that is set wins over it.
type fileConfig struct {
	// State is the --state backend URL.
	State string `yaml:"state"`
	// AllowHostPaths are host paths plugs may mount although they are
	// outside the project (as --allow-host-path).
	AllowHostPaths []string `yaml:"allow_host_paths"`
}

// plugPolicy is where plugs may point: the project, and the host paths
// allowed by --allow-host-path and the config file.
func plugPolicy(c *cli.Context) (plugpath.Policy, error) {
	wd, err := plugpath.WorkDir()
	if err != nil {
		return plugpath.Policy{}, err
	}
	cfg, _, err := readConfig()
	if err != nil {
		return plugpath.Policy{}, err
	}
	allowed := append(append([]string(nil), c.StringSlice("allow-host-path")...), cfg.AllowHostPaths...)
	return plugpath.Policy{WorkDir: wd, Allowed: allowed}, nil
}

// readConfig reads $GCOMPOSE_CONFIG, else .gcompose/config.yaml when it
// exists. Unknown keys are errors, as in descriptors.
func readConfig() (*fileConfig, string, error) {
	path, explicit := os.LookupEnv("GCOMPOSE_CONFIG")
	if !explicit {
		path = defaultConfigFile
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return &fileConfig{}, "", nil
	}
	if err != nil {
		return nil, path, fmt.Errorf("config file: %w", err)
	}
	var cfg fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return nil, path, fmt.Errorf("config file %s: %w", path, err)
	}
	return &cfg, path, nil
}

// stateURL is --state, else GCOMPOSE_STATE, else the config file's state,
// else the default directory.
func stateURL(c *cli.Context) (string, error) {
	if c.IsSet("state") {
		return c.String("state"), nil
	}
	cfg, _, err := readConfig()
	if err != nil {
		return "", withCode(exitError, err)
	}
	if cfg.State != "" {
		return cfg.State, nil
	}
	return c.String("state"), nil
}
