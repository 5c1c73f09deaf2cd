package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/spend"
	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/internal/syncwriter"
	"github.com/gcompose/gcompose/internal/testimage"
)

// TestE2ECostReportedByAThirdPartyAdapter: the SDK test adapter, which
// knows nothing of Golem, reports what its resource cost (spent, in USD);
// gcompose cost asks it and prints it, and after a destroy the state's
// ledger still holds it: gcompose cost shows what the application spent,
// --all the removed resource.
func TestE2ECostReportedByAThirdPartyAdapter(t *testing.T) {
	e := newEnv(t)
	image := testimage.Image(t, context.Background(), "./internal/testimage/testdata/sdkadapter", "gcompose-test/sdkadapter:e2e")
	body := "meta:\n  name: " + e.app + "\nplugs:\n  data:\n    path: ./out\nresources:\n  r:\n    type: " + image +
		"\n    config: {content: hello, cost: \"0.25\"}\n  free:\n    type: " + image + "\n    config: {content: free}\n"
	f := filepath.Join(e.dir, "cost.yaml")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("deploy", f, "--yes")

	out := e.must("cost", f).stdout
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^RESOURCE +SPENT +DUE +PER HOUR +COVERS$`),
		regexp.MustCompile(`(?m)^resources\.r +0\.25 USD +- +0\.01 USD +the file's storage$`),
		regexp.MustCompile(`(?m)^total +0\.25 USD +- +0\.01 USD$`),
	} {
		if !want.MatchString(out) {
			t.Fatalf("gcompose cost: no line matching %s in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "resources.free") {
		t.Fatalf("gcompose cost lists a resource whose adapter reports no cost:\n%s", out)
	}

	e.must("destroy", f, "--yes")
	// No descriptor needed: the ledger is in the state.
	var rep spend.Report
	if err := json.Unmarshal([]byte(e.must("cost", "--app", e.app, "--json").stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Resources) != 0 || len(rep.Ended) != 1 || len(rep.Totals) != 1 {
		t.Fatalf("cost --json after destroy: %+v: want no resource, one ended, one total", rep)
	}
	if r := rep.Ended[0]; r.Resource != "resources.r" || r.Amount != "0.25" || r.Currency != "USD" || r.Ended == nil || time.Since(*r.Ended) > time.Hour {
		t.Fatalf("ledger row %+v", r)
	}
	if tot := rep.Totals[0]; tot.Amount != "0.25" || tot.Currency != "USD" || tot.Ended != 1 || tot.Resources != 0 {
		t.Fatalf("total %+v", tot)
	}
	out = e.must("cost", "--app", e.app).stdout
	if !regexp.MustCompile(`(?m)^total \(with 1 removed: --all lists them\) +0\.25 USD +- +-$`).MatchString(out) {
		t.Fatalf("gcompose cost after destroy:\n%s", out)
	}
	out = e.must("cost", "--app", e.app, "--all").stdout
	if !regexp.MustCompile(`(?m)^resources\.r \(removed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\) +0\.25 USD +- +- +the file's storage$`).MatchString(out) {
		t.Fatalf("gcompose cost --all after destroy:\n%s", out)
	}
}

// TestE2ECostWaitsForTheStateLock: gcompose cost asks the adapters through
// a refresh, which takes the state lock; while another process holds it (a
// reconciler's cycle here), cost says who holds it and waits, by default,
// then prints what the application cost once the lock is free.
func TestE2ECostWaitsForTheStateLock(t *testing.T) {
	e := newEnv(t)
	image := testimage.Image(t, context.Background(), "./internal/testimage/testdata/sdkadapter", "gcompose-test/sdkadapter:e2e")
	f := filepath.Join(e.dir, "cost.yaml")
	body := "meta:\n  name: " + e.app + "\nplugs:\n  data:\n    path: ./out\nresources:\n  r:\n    type: " + image +
		"\n    config: {content: hello, cost: \"0.25\"}\n"
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("deploy", f, "--yes")
	defer e.must("destroy", f, "--yes")

	// The lock is held by this process; cost runs as another one (a file
	// lock is the OS's, per process).
	ctx := context.Background()
	st, err := state.NewFileStore(e.state, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	held, err := st.Lock(ctx, e.app, state.NewLockInfo("reconcile", "test"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gcomposeBinary(t), "cost", f, "--state", e.state)
	var out syncwriter.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waiting := regexp.MustCompile(`the state of ` + e.app + ` is locked by \S+@\S+ \(pid \d+[^)]*\) for reconcile since \S+: waiting up to 10m0s for it`)
	for deadline := time.Now().Add(time.Minute); !waiting.MatchString(out.String()); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			st.Unlock(ctx, held)
			t.Fatalf("gcompose cost ended (%v) while another process held the state lock, instead of waiting for it:\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			st.Unlock(ctx, held)
			<-exited
			t.Fatalf("gcompose cost did not say it waits for the lock within a minute:\n%s", out.String())
		}
	}
	// Still waiting a moment later: it does not give up on its own.
	time.Sleep(time.Second)
	select {
	case err := <-exited:
		t.Fatalf("gcompose cost ended (%v) while the lock was held:\n%s", err, out.String())
	default:
	}
	if err := st.Unlock(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("gcompose cost after the lock was released: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`(?m)^total +0\.25 USD +- +0\.01 USD$`).MatchString(out.String()) {
		t.Fatalf("gcompose cost after waiting for the lock:\n%s", out.String())
	}
	t.Logf("gcompose cost beside a held lock:\n%s", out.String())
}
