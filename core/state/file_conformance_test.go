package state_test

import (
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

func TestFileStore(t *testing.T) {
	statetest.RunWith(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
		dir := t.TempDir()
		open := func(t *testing.T) state.Store {
			s, err := state.NewFileStore(dir, state.Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		return open(t), open
	}, statetest.Features{})
}
