package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gcompose/gcompose/core/address"
	"github.com/gcompose/gcompose/core/plan"
	"github.com/gcompose/gcompose/core/runner"
	"github.com/gcompose/gcompose/protocol"
)

// Init returns what the adapter image answered to init, running it at most
// once per image ID: from memory, else from the disk cache, else by running
// the image (default entrypoint, no args) for resourceName.
func (c *Client) Init(ctx context.Context, image, resourceName string) (*Info, error) {
	id, err := c.ImageID(ctx, image)
	if err != nil {
		return nil, plan.Named(resourceName, err)
	}
	info, err := do(ctx, c, c.inits, id, func() (*Info, error) {
		if info := c.loadInit(id, image); info != nil {
			return info, nil
		}
		info, raw, err := c.runInit(ctx, image, id, resourceName)
		if err != nil {
			return nil, &initError{resource: resourceName, err: err}
		}
		c.saveInit(id, raw)
		return info, nil
	})
	var ie *initError
	if errors.As(err, &ie) {
		if ie.resource != resourceName {
			// The init that failed ran for another resource of the image.
			return nil, plan.Named(resourceName, fmt.Errorf("adapter image %s unusable: %w", image, ie.err))
		}
		return nil, ie.err
	}
	return info, err
}

// initError remembers which resource a failed init ran for.
type initError struct {
	resource string
	err      error
}

func (e *initError) Error() string { return e.err.Error() }
func (e *initError) Unwrap() error { return e.err }

func (c *Client) runInit(ctx context.Context, image, id, resource string) (*Info, []byte, error) {
	// Deployster's init request names the resource as written in the
	// manifest, like its other calls.
	req := protocol.Request{Name: address.AdapterName(resource), Type: image, Version: c.opts.Version, Verbose: c.opts.Verbose, Workspace: c.opts.Workspace}
	stdin, err := json.Marshal(req)
	if err != nil {
		return nil, nil, plan.Named(resource, fmt.Errorf("init call: encode request: %w", err))
	}
	timeout := c.opts.InitTimeout
	if timeout == 0 {
		timeout = c.opts.Timeout
	}
	res, err := c.opts.Runner.Run(ctx, runner.Spec{
		Image: id, Stdin: stdin, App: "", Resource: resource, Call: protocol.CallInit,
		Timeout: timeout, StdoutLimit: c.opts.StdoutLimit, Stderr: c.stderr(),
	})
	if err != nil {
		return nil, nil, named(image, err)
	}
	info, err := c.parseInit(image, id, res.Stdout)
	if err != nil {
		return nil, nil, c.answerError(resource, protocol.CallInit, image, res, err)
	}
	if info.Ext && info.Protocol != protocol.Version {
		return nil, nil, plan.Named(resource, fmt.Errorf("init call: adapter image %s speaks gcompose protocol %d, this gcompose speaks %d; %s",
			image, info.Protocol, protocol.Version, upgradeHint(info.Protocol)))
	}
	return info, res.Stdout, nil
}

func upgradeHint(v int) string {
	if v > protocol.Version {
		return "upgrade gcompose or use an older adapter image"
	}
	return "upgrade the adapter image"
}

// named gives a runner error the image reference the user wrote, instead of
// the image ID the container was run from.
func named(image string, err error) error {
	var ce *runner.CallError
	if errors.As(err, &ce) && strings.HasPrefix(ce.Image, "sha256:") {
		c := *ce
		c.Image = image
		return &c
	}
	return err
}

func (c *Client) parseInit(image, id string, raw []byte) (*Info, error) {
	if err := checkJSON(raw); err != nil {
		return nil, err
	}
	if err := c.v.ValidateInitResult(raw); err != nil {
		return nil, err
	}
	var ir protocol.InitResult
	if err := json.Unmarshal(raw, &ir); err != nil {
		return nil, err
	}
	info := &Info{ImageRef: image, ImageID: id, Init: ir}
	if ir.Gcompose != nil {
		info.Ext = true
		info.Protocol = ir.Gcompose.Protocol
	}
	return info, nil
}
