package runner_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/runner"
)

func TestWarnLogger(t *testing.T) {
	var got []string
	log := runner.WarnLogger(func(msg string) { got = append(got, msg) })
	log.Debug("not shown", "k", 1)
	log.Info("not shown either")
	log.Warn("a container could not be removed", "container", "abc123", "err", errors.New("state improper"))
	log.With("resource", "services.db").WithGroup("call").Error("failed", "step", "attach")
	want := []string{
		"a container could not be removed (container=abc123, err=state improper)",
		"failed (resource=services.db, call.step=attach)",
	}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}

	// Without a function, warnings go to the default logger.
	var def bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	defer slog.SetDefault(old)
	runner.WarnLogger(nil).Warn("a container could not be removed", "container", "abc123")
	if !strings.Contains(def.String(), `level=WARN msg="a container could not be removed (container=abc123)"`) {
		t.Errorf("default logger got %q", def.String())
	}
}
