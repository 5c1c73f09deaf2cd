package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gcompose/gcompose/core/project"
)

func openStore(c *cli.Context) (*project.State, error) {
	url, err := stateURL(c)
	if err != nil {
		return nil, err
	}
	return openStateURL(c, url)
}

// loadAppState is the persisted state of the app --app or the descriptor
// names, with that name; the store is closed again once read.
func loadAppState(c *cli.Context) (string, *project.Document, error) {
	name, _, err := appName(c, false)
	if err != nil {
		return "", nil, err
	}
	st, err := openStore(c)
	if err != nil {
		return "", nil, err
	}
	defer st.Close()
	doc, err := st.Load(c.Context, name)
	if err != nil {
		return "", nil, withCode(exitError, err)
	}
	return name, doc, nil
}
