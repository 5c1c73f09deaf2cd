package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/network"
	"github.com/gcompose/gcompose/adapters/golem/yagna"
	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// Timeouts of the waits of one create; a call that runs past them fails
// with what it was waiting for.
type Timeouts struct {
	Negotiation time.Duration // offers, counter-proposals, agreement approval
	Approval    time.Duration // one agreement's approval
	Exec        time.Duration // deploy + start, and each init command
}

// DefaultTimeouts fit the devnet and a healthy Golem Network.
func DefaultTimeouts() Timeouts {
	return Timeouts{Negotiation: 3 * time.Minute, Approval: 60 * time.Second, Exec: 5 * time.Minute}
}

// Adapter is the golem-service adapter.
func Adapter() sdk.Adapter {
	s := &svc{t: DefaultTimeouts()}
	return sdk.Adapter{
		Init: sdk.Static(protocol.InitResult{
			ConfigSchema: json.RawMessage(configSchema),
			Gcompose:     &protocol.InitExt{Network: "host", Env: network.EnvVars},
		}),
		State:   s.state,
		Actions: map[string]sdk.ActionFunc{"create": s.create, "delete": s.remove},
	}
}

type svc struct{ t Timeouts }

// Identity is what the service adapter persists as soon as it knows it.
type Identity struct {
	AgreementID string `json:"agreement_id,omitempty"`
	ActivityID  string `json:"activity_id,omitempty"`
	ProviderID  string `json:"provider_id,omitempty"`
	NetworkID   string `json:"network_id,omitempty"`
	IP          string `json:"ip,omitempty"`
	// Failed are providers that failed this resource: avoided next time.
	Failed []string `json:"failed_providers,omitempty"`
	// Applied fingerprints the config the rental was made for.
	Applied map[string]string `json:"applied,omitempty"`
	// Logs are what the init commands printed. They travel as identity
	// because the verifying state call only sees what the action reported;
	// the VALID state hands them on as state.logs (gcompose logs).
	Logs []LogEntry `json:"logs,omitempty"`
}

// LogEntry is one command's output, in the state.logs convention of
// docs/protocol.md.
type LogEntry struct {
	Source   string `json:"source,omitempty"`
	Command  string `json:"command,omitempty"`
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Time     string `json:"time,omitempty"`
}

// logLimit bounds each stream kept per command: logs are persisted and sent
// back on every call.
const logLimit = 16 << 10

func tailOf(s string) string {
	if len(s) <= logLimit {
		return s
	}
	return "..." + s[len(s)-logLimit:]
}

func (id Identity) asMap() map[string]any {
	b, _ := json.Marshal(id)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func identityOf(m map[string]any) Identity {
	var id Identity
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &id)
	return id
}

// staleState carries what the state call learnt to the actions.
type staleState struct {
	Failed []string `json:"failed_providers,omitempty"`
	// Previous is the address the node held before a rebuild.
	Previous string `json:"previous_ip,omitempty"`
}

// observed is what exists of a resource's rental.
type observed struct {
	activity  yagna.StateName // "" when missing
	actErr    string
	agreement *yagna.Agreement
}

func (o observed) alive() bool {
	return o.activity == yagna.StateReady && o.agreement != nil && o.agreement.State == yagna.AgreementApproved
}

func (o observed) anything() bool {
	return (o.activity != "" && o.activity != yagna.StateTerminated) ||
		(o.agreement != nil && o.agreement.State == yagna.AgreementApproved)
}

func (o observed) why() string {
	switch {
	case o.agreement == nil:
		return "the agreement is gone"
	case o.agreement.State != yagna.AgreementApproved:
		return "the agreement is " + string(o.agreement.State)
	case o.activity == "":
		return "the activity is gone"
	default:
		s := "the activity is " + string(o.activity)
		if o.actErr != "" {
			s += " (" + o.actErr + ")"
		}
		return s
	}
}

func observe(ctx context.Context, yc *yagna.Client, id Identity) (observed, error) {
	var o observed
	if id.AgreementID != "" {
		a, err := yc.GetAgreement(ctx, id.AgreementID)
		switch {
		case err == nil:
			o.agreement = &a
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		default:
			return o, fmt.Errorf("reading agreement %s: %w", id.AgreementID, err)
		}
	}
	if id.ActivityID != "" {
		st, err := yc.GetActivityState(ctx, id.ActivityID)
		switch {
		case err == nil:
			o.activity = st.Current()
			o.actErr = st.ErrorMessage
			if o.actErr == "" {
				o.actErr = st.Reason
			}
		case yagna.IsNotFound(err) || yagna.IsGone(err):
		default:
			return o, fmt.Errorf("reading activity %s state: %w", id.ActivityID, err)
		}
	}
	return o, nil
}

func (s *svc) state(ctx context.Context, req *sdk.Request) (*protocol.StateResult, error) {
	var cfg Config
	if err := req.DecodeConfig(&cfg); err != nil {
		return nil, err
	}
	yc, err := network.Client(req)
	if err != nil {
		return nil, err
	}
	p := req.Persisted()
	id := identityOf(p.Identity)
	o, err := observe(ctx, yc, id)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", req.Name, err)
	}
	if req.Desired() == protocol.Absent {
		if !o.anything() {
			return &protocol.StateResult{Status: protocol.Valid}, nil
		}
		return stale(protocol.ChangeDelete, "provider "+id.ProviderID+" still runs it", nil, nil, "delete")
	}
	ss := staleState{Failed: id.Failed, Previous: id.IP}
	if id.AgreementID == "" && id.ActivityID == "" {
		return stale(protocol.ChangeCreate, "not rented yet", nil, ss, "create")
	}
	if !o.alive() {
		// Whatever went wrong, the provider that ran it is avoided next time.
		if id.ProviderID != "" && !slices.Contains(ss.Failed, id.ProviderID) {
			ss.Failed = append(ss.Failed, id.ProviderID)
		}
		return stale(protocol.ChangeRebuild, o.why()+": renting again", nil, ss, "delete", "create")
	}
	if forces := rebuildForces(id.Applied, req.Config); len(forces) > 0 {
		return stale(protocol.ChangeRebuild, "changed: "+strings.Join(forces, ", ")+" (a running activity cannot be changed in place)", forces, ss, "delete", "create")
	}
	return &protocol.StateResult{Status: protocol.Valid, State: outputs(id, o.agreement)}, nil
}

func outputs(id Identity, a *yagna.Agreement) map[string]any {
	name := ""
	if a != nil {
		name = a.ProviderName()
	}
	out := map[string]any{
		"network_node": map[string]any{"ip": id.IP, "node_id": id.ProviderID},
		"agreement":    map[string]any{"id": id.AgreementID, "provider_id": id.ProviderID, "provider_name": name},
		"activity":     map[string]any{"id": id.ActivityID},
		"state":        "running",
	}
	if len(id.Logs) > 0 {
		out["logs"] = id.asMap()["logs"]
	}
	return out
}

func stale(change, reason string, forces []string, ss any, actions ...string) (*protocol.StateResult, error) {
	res := &protocol.StateResult{Status: protocol.Stale, Gcompose: &protocol.StateExt{Change: change, Reason: reason, Forces: forces}}
	if ss != nil {
		raw, err := sdk.StaleState(ss)
		if err != nil {
			return nil, err
		}
		res.StaleState = raw
	}
	for _, a := range actions {
		res.Actions = append(res.Actions, protocol.ActionSpec{Name: a})
	}
	if change == protocol.ChangeCreate || change == protocol.ChangeRebuild {
		res.Gcompose.Unknown = []string{"/network_node/ip", "/network_node/node_id", "/agreement", "/activity"}
	}
	return res, nil
}

// remove destroys the activity, takes the node out of the VPN and
// terminates the agreement; what is already gone is skipped.
func (s *svc) remove(ctx context.Context, req *sdk.Request) error {
	yc, err := network.Client(req)
	if err != nil {
		return err
	}
	id := identityOf(req.Persisted().Identity)
	var errs []error
	if id.ActivityID != "" {
		if err := yc.DestroyActivity(ctx, id.ActivityID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			errs = append(errs, fmt.Errorf("destroying activity %s: %w", id.ActivityID, err))
		}
	}
	if id.NetworkID != "" && id.ProviderID != "" {
		if err := yc.RemoveNode(ctx, id.NetworkID, id.ProviderID); err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) {
			errs = append(errs, fmt.Errorf("removing node %s from VPN %s: %w", id.ProviderID, id.NetworkID, err))
		}
	}
	if id.AgreementID != "" {
		err := yc.TerminateAgreement(ctx, id.AgreementID, yagna.TerminationReason("gcompose: service "+req.Name+" removed"))
		if err != nil && !yagna.IsNotFound(err) && !yagna.IsGone(err) && !yagna.IsConflict(err) {
			errs = append(errs, fmt.Errorf("terminating agreement %s: %w", id.AgreementID, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("service %s: %w", req.Name, err)
	}
	// Keep the list of failed providers for the create that may follow.
	if err := req.ReportIdentity(map[string]any{"agreement_id": "", "activity_id": "", "provider_id": "", "ip": ""}); err != nil {
		return err
	}
	req.Printf("service %s: activity %s destroyed, agreement %s terminated", req.Name, id.ActivityID, id.AgreementID)
	return nil
}
