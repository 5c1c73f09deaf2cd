package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// expiryClock speeds the devnet's agreement time up: the 6 min expiration
// below ends after 15 s. The rule stays: a provider takes no expiration
// under 5 min (agent/provider/src/market/negotiator/builtin/expiration.rs).
const expiryClock = 24

// TestExpiredAgreementIsRentedAgain: a service rented with the shortest
// expiration a provider takes (6 min: 5 min is its floor, from the moment
// it negotiates) is ended Expired by its provider, as yagna's provider
// agent does (agent/provider/src/tasks/task_manager.rs schedule_expiration).
// refresh says so and blames no one, deploy rents it again, and the
// reconciler repairs the next expiry without a person.
func TestExpiredAgreementIsRentedAgain(t *testing.T) {
	golemSweep(t)
	e := start(t, devnet.Config{Providers: reconcileProviders(3), AgreementClock: expiryClock})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	st := e.etcdState(t)
	desc := filepath.Join(e.dir, "app.yaml")
	if err := os.WriteFile(desc, []byte(marketApp("      expiration: 6m\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must(ctx, "deploy", "-f", desc, "--yes")
	first := identity(t, docOf(t, ctx, st, e.app), "services.db", "agreement_id")

	ended := e.waitEnded(ctx, first)
	if ended.Terminator != yagna.TerminatorProvider || ended.Reason == nil || ended.Reason.Extra["golem.provider.code"] != "Expired" {
		t.Fatalf("agreement %s ended %+v %+v, want by the provider: Expired", first, ended, ended.Reason)
	}
	refreshed := e.must(ctx, "refresh", "-f", desc)
	if !strings.Contains(refreshed, "agreement "+first+" ended by the provider: Expired") || strings.Contains(refreshed, "avoiding provider") {
		t.Fatalf("refresh after the expiry does not say the provider ended it Expired, blaming no one:\n%s", refreshed)
	}

	deployed := e.must(ctx, "deploy", "-f", desc, "--yes")
	doc := docOf(t, ctx, st, e.app)
	second := identity(t, doc, "services.db", "agreement_id")
	if second == "" || second == first {
		t.Fatalf("deploy after the expiry did not rent again (agreement %q):\n%s", second, deployed)
	}
	if f, _ := doc.Resources["services.db"].Identity["failed_providers"].([]any); len(f) != 0 {
		t.Fatalf("failed providers %v after an expiry, which is no one's failure", f)
	}

	r := e.startReconciler(ctx, "expiry", desc)
	r.waitHealth(ctx, true, time.Minute)
	e.waitEnded(ctx, second)
	repaired, _ := r.events.waitFor(t, 0, 2*time.Minute, "the repair of the expired service", phase("repaired"))
	third := identity(t, docOf(t, ctx, st, e.app), "services.db", "agreement_id")
	if third == "" || third == second || third == first {
		t.Fatalf("the reconciler's repair (%+v) left agreement %q", repaired, third)
	}
	t.Logf("agreements %s, %s, %s; events:\n%s", first, second, third, r.events.dump())
}

// waitEnded waits until agreement id is Terminated and returns yagna's
// event of it.
func (e *env) waitEnded(ctx context.Context, id string) yagna.AgreementOperationEvent {
	e.t.Helper()
	for {
		ev, err := e.yc.TerminateReason(ctx, id)
		if err == nil {
			return ev
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("agreement %s not terminated: %v", id, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
