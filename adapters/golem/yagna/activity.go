package yagna

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// CreateActivity starts an activity on an approved Agreement (POST
// /activity-api/v1/activity → 200, core/activity/src/requestor/control.rs
// create_activity). The answer is {activityId, credentials?} or a bare JSON
// string (yagna answers in the request's shape); both are returned as a result.
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

// DestroyActivity destroys an activity (DELETE /activity/{id} → 200 null).
func (c *Client) DestroyActivity(ctx context.Context, activityID string) error {
	return knownActivity(activityID, c.do(ctx, request{method: http.MethodDelete, path: activityPath(activityID)}))
}

// knownActivity reports yagna's answer for an activity id it does not know as
// a 404 (IsNotFound), keeping the 500 in Answered: every /activity/{id}...
// call first looks up the activity's agreement and answers 500 "DAO error:
// Not found: agreement id for activity: <id>" when there is none
// (core/activity/src/dao/activity.rs get_agreement_id → DaoError::NotFound,
// wrapped as Error::Dao, which core/activity/src/error.rs maps to 500).
func knownActivity(activityID string, err error) error {
	ae, ok := err.(*APIError)
	if !ok || ae.Status != http.StatusInternalServerError || !strings.Contains(ae.Message, "Not found: agreement id for activity") {
		return err
	}
	cp := *ae
	cp.Status, cp.Answered = http.StatusNotFound, http.StatusInternalServerError
	return &cp
}

// Exec runs an ExeScript and returns its batch id (POST /activity/{id}/exec → 200).
func (c *Client) Exec(ctx context.Context, activityID string, script ExeScriptRequest) (string, error) {
	var batch string
	err := c.do(ctx, request{method: http.MethodPost, path: activityPath(activityID) + "/exec", body: script, out: &batch})
	return batch, knownActivity(activityID, err)
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
	return out, knownActivity(activityID, err)
}

// WaitBatch polls a batch's results (each poll waiting up to pollTimeout) until
// one says isBatchFinished, and returns them all. It stops with the context.
//
// A poll's failure is not the batch's: on a real network yagna answers 408
// when the provider had nothing new within the timeout, 500 "GSB error ...
// endpoint address not found" while the exe-unit is briefly unreachable,
// and gateways answer 504. yapapi retries these (yapapi/rest/activity.py
// PollingBatch._get_results and SuppressedExceptions(is_intermittent_error)),
// golem-js retries 408 and 500 with backoff (src/activity/exe-script-executor.ts
// RETRYABLE_ERROR_STATUS_CODES). So does WaitBatch: 408 is "no news", a
// GSB 500 or a 504 is retried with backoff after checking, as yapapi does,
// that the activity was not terminated meanwhile; it gives up after
// MaxPollFailures of them in a row.
func (c *Client) WaitBatch(ctx context.Context, activityID, batchID string, pollTimeout time.Duration) ([]ExeScriptCommandResult, error) {
	failures := 0
	var res []ExeScriptCommandResult
	for {
		start := time.Now()
		got, err := c.ExecBatchResults(ctx, activityID, batchID, pollTimeout, -1)
		switch {
		case err == nil:
			failures = 0
			res = got
		case IsTimeout(err):
			failures = 0
		case IsTransientExecError(err) && ctx.Err() == nil:
			failures++
			// yapapi PollingBatch._activity_terminated: a terminated
			// activity will never answer; say so instead of retrying.
			if st, serr := c.GetActivityState(ctx, activityID); serr == nil && st.Current() == StateTerminated {
				why := firstOf(st.ErrorMessage, st.Reason)
				return res, fmt.Errorf("activity %s was terminated while batch %s ran (%s): %w", activityID, batchID, why, err)
			}
			if failures > MaxPollFailures {
				return res, fmt.Errorf("batch %s of activity %s: %d polls in a row failed: %w", batchID, activityID, failures, err)
			}
			c.logger().DebugContext(ctx, "exec results poll failed, retrying", "activity", activityID, "batch", batchID, "failures", failures, "err", err)
			if err := sleep(ctx, Backoff(c.Backoff, failures)); err != nil {
				return res, fmt.Errorf("waiting for batch %s of activity %s: %w", batchID, activityID, err)
			}
			continue
		default:
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
			if err := sleep(ctx, minPollInterval); err != nil {
				return res, fmt.Errorf("waiting for batch %s of activity %s: %w", batchID, activityID, err)
			}
		}
	}
}

// minPollInterval is the least time between two polls of WaitBatch.
const minPollInterval = 100 * time.Millisecond

// MaxPollFailures is how many failed exec-result polls in a row WaitBatch
// tolerates (golem-js: activityExeBatchResultMaxRetries 20 with backoff up
// to 15 s; yapapi: 3 GSB errors 3 s apart, then the 408/504s of
// is_intermittent_error without limit). 10 with backoff up to MaxBackoff is
// about half a minute of an unreachable exe-unit.
const MaxPollFailures = 10

// IsGSBError reports a 500 whose message is a GSB (the service bus between
// yagna nodes) error, such as "GSB error: ... endpoint address not found":
// yagna could not reach the provider's side (yapapi/rest/activity.py
// _is_gsb_endpoint_not_found_error; core/activity/src/error.rs Error::Gsb).
func IsGSBError(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusInternalServerError && strings.Contains(strings.ToLower(ae.Message), "gsb error")
}

// IsTransientExecError reports an exec-results poll failure worth
// retrying: a GSB 500 or a 504.
func IsTransientExecError(err error) bool {
	return IsGSBError(err) || StatusOf(err) == http.StatusGatewayTimeout
}

// IsProviderUnreachable reports an answer from yagna saying that it could
// not get one from the provider: yagna forwards activity calls (state,
// exec, destroy) and agreement termination to the provider over GSB, and
// answers 408 when the provider does not reply in time and 500 when the
// GSB call fails (core/activity/src/api.rs get_activity_state_web,
// core/activity/src/error.rs; core/market/src/rest_api/error.rs
// ProtocolTerminate); a gateway in front of yagna answers 504. It is never
// true of a transport error: that is yagna itself being unreachable.
func IsProviderUnreachable(err error) bool {
	switch StatusOf(err) {
	case http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return "no reason given"
}

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
	return s, knownActivity(activityID, err)
}

// GetActivityUsage returns an activity's usage counters (GET /activity/{id}/usage).
func (c *Client) GetActivityUsage(ctx context.Context, activityID string) (ActivityUsage, error) {
	var u ActivityUsage
	err := c.do(ctx, request{method: http.MethodGet, path: activityPath(activityID) + "/usage", out: &u})
	return u, knownActivity(activityID, err)
}

// GetActivityAgreement returns the id of an activity's Agreement (GET
// /activity/{id}/agreement).
func (c *Client) GetActivityAgreement(ctx context.Context, activityID string) (string, error) {
	var id string
	err := c.do(ctx, request{method: http.MethodGet, path: activityPath(activityID) + "/agreement", out: &id})
	return id, knownActivity(activityID, err)
}

func activityPath(activityID string) string {
	return ActivityPrefix + "/activity/" + seg(activityID)
}
