package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gcompose/gcompose/internal/backoff"
)

// errTryAgain marks an attempt that met the state moving under it (a
// revision compacted during a load, a lock key gone between a compare and
// its read): a fresh attempt resolves it. Wrap it with what moved:
// fmt.Errorf("lock key %s vanished ...: %w", key, errTryAgain).
var errTryAgain = errors.New("the state moved during the attempt")

// retryable says whether err is etcd being unavailable for a moment (a
// member stopped, no leader yet) or errTryAgain, rather than an answer.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errTryAgain) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true // the attempt's own timeout (the caller's is checked apart)
	}
	for _, e := range []error{rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrTimeout,
		rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrNotCapable} {
		if errors.Is(err, e) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// retry runs op until it succeeds, fails for good, or etcd stays
// unavailable for RetryTimeout. attempt counts from 0; a write uses it to
// know that an earlier attempt may have committed.
func (s *Store) retry(ctx context.Context, what string, op func(ctx context.Context, attempt int) error) error {
	return s.retryEach(ctx, what, attemptTimeout, op)
}

// attemptTimeout bounds one request: a member that stopped answering
// without closing the connection is given up on and another one tried.
const attemptTimeout = 5 * time.Second

// retryEach is retry with a timeout per attempt (a Load reads many pages in
// one attempt).
func (s *Store) retryEach(ctx context.Context, what string, each time.Duration, op func(ctx context.Context, attempt int) error) error {
	deadline := time.Now().Add(s.cfg.RetryTimeout)
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, each)
		err := op(actx, attempt)
		cancel()
		if err == nil || !retryable(err) || ctx.Err() != nil || time.Now().After(deadline) {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("%s: %w", what, ctx.Err())
			}
			return err
		}
		s.stats.retries.Add(1)
		s.log.Debug("etcd unavailable, retrying", "what", what, "attempt", attempt, "err", err)
		// 50 ms, doubling, at most 1 s.
		t := time.NewTimer(backoff.Policy{Base: 50 * time.Millisecond, Max: time.Second}.Delay(attempt, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// ---- locks
