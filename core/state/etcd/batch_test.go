package etcd

import (
	"context"
	"testing"
	"time"
)

func TestBatchContext(t *testing.T) {
	c1, cancel1 := context.WithCancel(context.Background())
	c2, cancel2 := context.WithCancel(context.Background())
	ctx, done := batchContext([]*applyReq{{ctx: c1}, {ctx: c2}})
	defer done()
	cancel1()
	time.Sleep(20 * time.Millisecond)
	if ctx.Err() != nil {
		t.Fatal("the batch was cancelled while one of its callers still waits")
	}
	cancel2()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was not cancelled after all its callers gave up")
	}
	// Released without cancellation: the watcher goroutine ends.
	c3, cancel3 := context.WithCancel(context.Background())
	defer cancel3()
	_, done2 := batchContext([]*applyReq{{ctx: c3}, {ctx: context.Background()}})
	done2()
}
