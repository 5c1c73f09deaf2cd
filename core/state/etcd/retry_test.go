package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The backend's own "try again" (the state moved during an attempt) is a
// sentinel of its own, recognised wrapped; etcd being unavailable stays
// retryable; an answer is not.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("lock key /k vanished between compare and read: %w", errTryAgain), true},
		{fmt.Errorf("load: %w", fmt.Errorf("revision compacted: %w", errTryAgain)), true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{context.DeadlineExceeded, true},
		{errors.New("the state moved during the attempt"), false}, // the text alone is no signal
		{status.Error(codes.InvalidArgument, "bad"), false},
		{nil, false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
