package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/gcompose/gcompose/internal/enginecall"
)

// LabelCreate is a nonce every container create carries, one per create.
// A create cancelled after its request reached the engine leaves a
// container whose ID gcompose never learnt: the engine goes on and makes
// it. The runner finds it by this label and removes it at once, rather
// than leaving it to the next run's clean-up.
const LabelCreate = "gcompose.create"

// createSettle bounds how long, after a create was cancelled once its
// request was sent, the runner looks for the container the engine may still
// be making; one that appears later is the next run's clean-up's.
const createSettle = 3 * time.Second

// withNonce is cfg with a fresh LabelCreate, and that nonce.
func withNonce(cfg *container.Config) (*container.Config, string) {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	nonce := hex.EncodeToString(b)
	c := *cfg
	c.Labels = maps.Clone(cfg.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[LabelCreate] = nonce
	return &c, nonce
}

// traceSent is ctx with a trace that sets sent once a request was written
// whole: from then on, the engine may act on it whatever the client sees.
func traceSent(ctx context.Context, sent *atomic.Bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			sent.Store(true)
		}
	}})
}

// createdUnknown says whether a failed create may have made a container
// nobody knows of: the request was sent and the call was cancelled (or its
// deadline passed) before the answer came. An engine that answered, or one
// that does not answer at all (asking it again would wait as long), is not.
func createdUnknown(ctx context.Context, err error, sent bool) bool {
	if err == nil || !sent || errors.Is(err, enginecall.ErrHung) {
		return false
	}
	return ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// removeCreated removes the container a cancelled create made, found by its
// nonce (LabelCreate), on a context that outlives ctx. It looks again for a
// moment (createSettle) while the engine may still be making it.
func (r *Runner) removeCreated(ctx context.Context, cfg *container.Config, nonce string) {
	rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createSettle+cleanupTimeout)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", LabelCreate+"="+nonce))
	deadline := time.Now().Add(createSettle)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		cs, err := r.containerList(rmCtx, f)
		if err != nil {
			r.log.Warn("a container create was cancelled after it reached the engine, and its container could not be looked for; the next run holding this application's state lock removes it",
				"image", cfg.Image, "err", err)
			return
		}
		for _, c := range cs {
			if err := r.remove(rmCtx, c.ID); err != nil {
				r.log.Warn("the container of a cancelled create could not be removed; the next run holding this application's state lock removes it, or remove it yourself (docker rm -f "+shortID(c.ID)+")",
					"container", shortID(c.ID), "err", err)
				continue
			}
			r.log.Debug("removed the container of a cancelled create", "container", shortID(c.ID), "image", cfg.Image)
		}
		if len(cs) > 0 || time.Now().After(deadline) {
			return
		}
		select {
		case <-rmCtx.Done():
			return
		case <-time.After(wait):
		}
	}
}
