package state_test

import (
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

func TestMemoryStore(t *testing.T) {
	statetest.Run(t, func(t *testing.T) (state.Store, func(*testing.T) state.Store) {
		return state.NewMemoryStore(), nil
	})
}
