package devnet_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// TestProviderEndsExpiredAndIdleAgreements: a provider ends an approved agreement on its own, as
// yagna's provider agent does (agent/provider/src/tasks/task_manager.rs): NoActivity when no activity
// runs on it within the idle timeout, Expired at its golem.srv.comp.expiration (here an hour, which
// agreementClock 720 makes 5 s of real time). Both reasons are GolemReason::new's: the BreakReason's
// Display and its code (agent/provider/src/market/termination_reason.rs).
func TestProviderEndsExpiredAndIdleAgreements(t *testing.T) {
	e := start(t, devnet.Config{
		Providers:            []devnet.ProviderConfig{{Name: "p", Count: 2}},
		IdleAgreementTimeout: devnet.Duration{Duration: 2 * time.Second},
		AgreementClock:       720,
	})
	ctx := ctxT(t, time.Minute)

	busy := e.rent(ctx, taskPackage(testHash))
	rented := time.Now()
	if _, err := e.c.CreateActivity(ctx, busy.agreement); err != nil {
		t.Fatalf("CreateActivity: %v", err)
	}
	idle := e.rent(ctx, taskPackage(testHash))

	idleEv := waitTerminated(t, ctx, e.c, idle.agreement)
	if idleEv.Terminator != yagna.TerminatorProvider || idleEv.Reason == nil ||
		idleEv.Reason.Extra["golem.provider.code"] != "NoActivity" || idleEv.Reason.Message != "No activity created within 2s" {
		t.Fatalf("idle agreement: %+v %+v, want ended by the provider: NoActivity", idleEv, idleEv.Reason)
	}
	busyEv := waitTerminated(t, ctx, e.c, busy.agreement)
	if busyEv.Terminator != yagna.TerminatorProvider || busyEv.Reason == nil ||
		busyEv.Reason.Extra["golem.provider.code"] != "Expired" || !strings.HasPrefix(busyEv.Reason.Message, "Agreement expired @ ") {
		t.Fatalf("agreement with an activity: %+v %+v, want ended by the provider: Expired", busyEv, busyEv.Reason)
	}
	// An hour at 720 times the speed: 5 s after approval, not sooner.
	if took := time.Since(rented); took < 4*time.Second {
		t.Fatalf("Expired %s after the rental, want about 5 s", took)
	}
}

// waitTerminated polls until the agreement is Terminated and returns yagna's event of it.
func waitTerminated(t *testing.T, ctx context.Context, c *yagna.Client, id string) yagna.AgreementOperationEvent {
	t.Helper()
	for {
		a, err := c.GetAgreement(ctx, id)
		if err != nil {
			t.Fatalf("GetAgreement %s: %v", id, err)
		}
		if a.State == yagna.AgreementTerminated {
			ev, err := c.TerminateReason(ctx, id)
			if err != nil {
				t.Fatalf("TerminateReason %s: %v", id, err)
			}
			return ev
		}
		select {
		case <-ctx.Done():
			t.Fatalf("agreement %s still %s: %v", id, a.State, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
