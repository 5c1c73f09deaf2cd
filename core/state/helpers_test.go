package state_test

import (
	"log/slog"
	"testing"
)

// testLogger logs to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
