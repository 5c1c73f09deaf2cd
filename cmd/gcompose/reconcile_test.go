package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/reconcile"
)

// TestReconcileEventsKeepTextAsTyped: the reconciler's events are written
// as the engine's are (TestJSONKeepsTextAsTyped), not HTML-escaped.
func TestReconcileEventsKeepTextAsTyped(t *testing.T) {
	var buf bytes.Buffer
	s := newEventStream(&buf)
	const msg = `repair failed: init[1] /bin/sh -c "run > /tmp/out 2> /tmp/err &" <x>`
	s.event(reconcile.Event{Time: time.Unix(0, 0), Level: slog.LevelError, Phase: reconcile.PhaseRepairFailed, Resource: "resources.a", Message: msg, Duration: time.Second})
	s.Close()
	got := buf.String()
	want := `{"v":1,"type":"event","time":"1970-01-01T00:00:00Z","level":"error","resource":"resources.a","phase":"repair-failed","message":"repair failed: init[1] /bin/sh -c \"run > /tmp/out 2> /tmp/err &\" <x>","duration_ms":1000}` + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, `\u00`) {
		t.Fatalf("HTML-escaped:\n%s", got)
	}
}
