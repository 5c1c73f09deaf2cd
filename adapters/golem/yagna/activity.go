package yagna

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// CreateActivity starts an activity on an approved Agreement (POST
// /activity-api/v1/activity → 201). The answer is {activityId, credentials?} or,
// from older servers, a bare JSON string; both are returned as a result.
func (c *Client) CreateActivity(ctx context.Context, agreementID string) (CreateActivityResult, error) {
	var raw []byte
	err := c.do(ctx, request{
		method: http.MethodPost,
		path:   ActivityPrefix + "/activity",
		body:   CreateActivityRequest{AgreementID: agreementID},
		raw:    &raw,
	})
	if err != nil {
		return CreateActivityResult{}, err
	}
	raw = bytes.TrimSpace(raw)
	var res CreateActivityResult
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &res.ActivityID); err != nil {
			return res, fmt.Errorf("yagna POST %s/activity: decoding answer: %w", ActivityPrefix, err)
		}
	} else if err := json.Unmarshal(raw, &res); err != nil {
		return res, fmt.Errorf("yagna POST %s/activity: decoding answer: %w", ActivityPrefix, err)
	}
	if res.ActivityID == "" {
		return res, fmt.Errorf("yagna POST %s/activity: answer has no activity id", ActivityPrefix)
	}
	return res, nil
}

// DestroyActivity destroys an activity (DELETE /activity/{id} → 200).
func (c *Client) DestroyActivity(ctx context.Context, activityID string) error {
	return c.do(ctx, request{method: http.MethodDelete, path: activityPath(activityID)})
}

// Exec runs an ExeScript and returns its batch id (POST /activity/{id}/exec → 200).
func (c *Client) Exec(ctx context.Context, activityID string, script ExeScriptRequest) (string, error) {
	var batch string
	err := c.do(ctx, request{method: http.MethodPost, path: activityPath(activityID) + "/exec", body: script, out: &batch})
	return batch, err
}

// ExecCommands serializes cmds and runs them (see Exec).
func (c *Client) ExecCommands(ctx context.Context, activityID string, cmds ...ExeScriptCommand) (string, error) {
	script, err := ExeScript(cmds...)
	if err != nil {
		return "", err
	}
	return c.Exec(ctx, activityID, script)
}

// ExecBatchResults returns the results so far of a batch (GET
// /activity/{id}/exec/{batchId}?timeout=). They are cumulative. timeout < 0
// leaves the parameter out; commandIndex >= 0 waits for that command.
func (c *Client) ExecBatchResults(ctx context.Context, activityID, batchID string, timeout time.Duration, commandIndex int) ([]ExeScriptCommandResult, error) {
	q := url.Values{}
	if timeout >= 0 {
		q.Set("timeout", seconds(timeout))
	}
	if commandIndex >= 0 {
		q.Set("commandIndex", strconv.Itoa(commandIndex))
	}
	var out []ExeScriptCommandResult
	err := c.do(ctx, request{
		method: http.MethodGet,
		path:   activityPath(activityID) + "/exec/" + seg(batchID),
		query:  q,
		out:    &out,
	})
	return out, err
}

// WaitBatch polls a batch's results (each poll waiting up to pollTimeout) until
// one says isBatchFinished, and returns them all. A 408 answer counts as "no
// news yet". It stops with the context.
func (c *Client) WaitBatch(ctx context.Context, activityID, batchID string, pollTimeout time.Duration) ([]ExeScriptCommandResult, error) {
	for {
		start := time.Now()
		res, err := c.ExecBatchResults(ctx, activityID, batchID, pollTimeout, -1)
		if err != nil && !IsTimeout(err) {
			return res, err
		}
		for _, r := range res {
			if r.IsBatchFinished {
				return res, nil
			}
		}
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("waiting for batch %s of activity %s: %w", batchID, activityID, err)
		}
		// a server that answers at once (timeout 0, or one that ignores it)
		// must not make us spin
		if time.Since(start) < minPollInterval {
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("waiting for batch %s of activity %s: %w", batchID, activityID, ctx.Err())
			case <-time.After(minPollInterval):
			}
		}
	}
}

// minPollInterval is the least time between two polls of WaitBatch.
const minPollInterval = 100 * time.Millisecond

// FirstError returns the first result whose result is "Error", if any.
func FirstError(results []ExeScriptCommandResult) (ExeScriptCommandResult, bool) {
	for _, r := range results {
		if r.Result == ResultError {
			return r, true
		}
	}
	return ExeScriptCommandResult{}, false
}

// GetActivityState returns an activity's state (GET /activity/{id}/state).
func (c *Client) GetActivityState(ctx context.Context, activityID string) (ActivityState, error) {
	var s ActivityState
	err := c.do(ctx, request{method: http.MethodGet, path: activityPath(activityID) + "/state", out: &s})
	return s, err
}

// GetActivityUsage returns an activity's usage counters (GET /activity/{id}/usage).
func (c *Client) GetActivityUsage(ctx context.Context, activityID string) (ActivityUsage, error) {
	var u ActivityUsage
	err := c.do(ctx, request{method: http.MethodGet, path: activityPath(activityID) + "/usage", out: &u})
	return u, err
}

// GetActivityAgreement returns the id of an activity's Agreement (GET
// /activity/{id}/agreement).
func (c *Client) GetActivityAgreement(ctx context.Context, activityID string) (string, error) {
	var id string
	err := c.do(ctx, request{method: http.MethodGet, path: activityPath(activityID) + "/agreement", out: &id})
	return id, err
}

func activityPath(activityID string) string {
	return ActivityPrefix + "/activity/" + seg(activityID)
}
