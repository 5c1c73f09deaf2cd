package runner_test

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/internal/testimage"
)

func TestSession(t *testing.T) {
	ctx, r, img := setup(t)
	var stderr syncBuffer
	s := spec(img, "serve")
	s.Stderr = &stderr
	s.Resource = "serve test"
	sess, err := r.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(sess.Stdout())
	for i, req := range []string{
		`{"id":1,"call":"state","request":{"name":"a","config":{"mode":"echo"}}}`,
		`{"id":2,"call":"state","request":{"name":"b","config":{"mode":"fail"}}}`,
	} {
		if _, err := sess.Write([]byte(req + "\n")); err != nil {
			t.Fatal(err)
		}
		if !out.Scan() {
			t.Fatalf("no response %d: %v", i, out.Err())
		}
		if !strings.Contains(out.Text(), `"id":`+string(rune('1'+i))) {
			t.Fatalf("response %d: %s", i, out.Text())
		}
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session not done after Close")
	}
	if !strings.Contains(stderr.String(), "[serve test] serving\n") || !strings.Contains(sess.StderrTail(), "stdin closed, server exits") {
		t.Errorf("stderr %q, tail %q", stderr.String(), sess.StderrTail())
	}
}

func TestSessionEndsByItself(t *testing.T) {
	ctx, r, img := setup(t)
	sess, err := r.Start(ctx, spec(img, "exit", "3"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sess.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("session of an exiting container not done")
	}
	if !strings.Contains(sess.StderrTail(), "giving up") {
		t.Errorf("tail %q", sess.StderrTail())
	}
	if _, err := sess.Write([]byte("x\n")); err == nil {
		t.Error("write to an ended session succeeded")
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerCloseStopsSessions(t *testing.T) {
	ctx, _, img := setup(t)
	r, err := runner.New(ctx, runner.Options{Labels: testimage.Labels(t)})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*runner.Session
	for i := 0; i < 2; i++ {
		s, err := r.Start(ctx, spec(img, "serve"))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		select {
		case <-s.Done():
		default:
			t.Error("a session still runs after the runner closed")
		}
	}
	// setup's cleanup checks that no container is left.
}
