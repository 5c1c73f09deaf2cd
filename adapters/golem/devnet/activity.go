package devnet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
)

const activityPrefix = "/activity-api/v1"

type activity struct {
	id, agreementID string
	providerID      string
	state, next     string // next "" is null
	reason, errMsg  string
	containerID     string
	created         time.Time
	readySince      time.Time
	endedAt         time.Time
	due             *ratAmount
	usage           []float64
	lastNote        string
	lastNoteAt      time.Time
	batches         map[string]*batch
	nets            map[string]string // VPN id → node IP
	vpnAddrs        []vpnAddr         // what start gives the container's TUN devices, in their order
	link            *vpnLink          // the container's link to the VPN relay, once started on VPNs
	entrypoint      []string          // the image's ENTRYPOINT and CMD, which start runs when asked (payload.go)
	execMu          sync.Mutex        // one batch at a time
	traces          []*BatchTrace     // per batch, in the order posted (trace.go)
	ctx             context.Context
	cancel          context.CancelFunc
}

// vpnAddr is a VPN address a node's container takes on its TUN device to that VPN (vpnrelay.go).
type vpnAddr struct {
	vpnID string
	addr  netip.Addr
	bits  int
}

// payloadUlimits are a payload container's limits: open files as Linux gives init, what a provider's VM
// runs with (1024 soft, 4096 hard: include/asm-generic/resource.h INR_OPEN_CUR, INR_OPEN_MAX); processes
// 32768, the kernel's default pid_max (include/linux/threads.h PID_MAX_DEFAULT), which no payload reaches
// and which engines run within (the rootful Podman here runs with 32768 and asks 4194304 by default).
func payloadUlimits() []*container.Ulimit {
	return []*container.Ulimit{
		{Name: "nofile", Soft: 1024, Hard: 4096},
		{Name: "nproc", Soft: 32768, Hard: 32768},
	}
}

// vpnJoinWait bounds how long start waits for devnet-init to bring the VPNs up.
const vpnJoinWait = 30 * time.Second

// joinVPNs joins the started container to its VPNs: devnet-init (`devnet-init vpn`, run as root beside
// PID 1: the image's USER has no NET_ADMIN) creates a TUN device per VPN with the node's address and
// connects to the relay, which routes the node's packets from then on (vpnrelay.go).
func (s *Server) joinVPNs(ctx context.Context, act *activity) error {
	s.mu.Lock()
	addrs := slices.Clone(act.vpnAddrs)
	s.mu.Unlock()
	if len(addrs) == 0 {
		return nil
	}
	if s.relay.err != nil {
		return s.relay.err
	}
	token := newID()
	argv := []string{s.initCmd(), "vpn", s.relay.inner, token}
	var vpns []string
	var ips []netip.Addr
	for _, a := range addrs {
		argv = append(argv, netip.PrefixFrom(a.addr, a.bits).String())
		vpns, ips = append(vpns, a.vpnID), append(ips, a.addr)
	}
	link := s.relay.expect(token, vpns, ips)
	fail := func(err error) error {
		s.relay.drop(link)
		return err
	}
	ex, err := s.docker.ContainerExecCreate(ctx, act.containerID, container.ExecOptions{User: "0", Cmd: argv, Detach: true})
	if err != nil {
		return fail(fmt.Errorf("joining the VPNs: %w", err))
	}
	if err := s.docker.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true}); err != nil {
		return fail(fmt.Errorf("joining the VPNs: %w", err))
	}
	defer step(ctx, "vpn ready", time.Now())
	timer := time.NewTimer(vpnJoinWait)
	defer timer.Stop()
	select {
	case err := <-link.ready:
		if err != nil {
			return fail(fmt.Errorf("joining the VPNs (%s): %w", strings.Join(argv[4:], ", "), err))
		}
	case <-timer.C:
		why := ""
		if in, err := s.docker.ContainerExecInspect(context.WithoutCancel(ctx), ex.ID); err == nil && !in.Running {
			why = fmt.Sprintf(" (it exited with code %d)", in.ExitCode)
		}
		return fail(fmt.Errorf("joining the VPNs: devnet-init did not connect to the devnet's socket %s within %s%s", s.relay.inner, vpnJoinWait, why))
	case <-ctx.Done():
		return fail(fmt.Errorf("joining the VPNs: the activity ended"))
	}
	s.mu.Lock()
	act.link = link
	s.mu.Unlock()
	return nil
}

// terminate marks the activity Terminated; the caller holds s.mu.
func (a *activity) terminate(reason, errMsg string) {
	if a.state == "Terminated" {
		return
	}
	a.state, a.next = "Terminated", ""
	a.reason, a.errMsg = reason, errMsg
	a.endedAt = time.Now()
	a.cancel()
}

type batch struct {
	id       string
	cmds     []map[string]json.RawMessage
	results  []cmdResult
	codes    []int // exit code per result (0 for non-run commands, -1 when unknown)
	finished bool
	trace    *BatchTrace
}

type cmdResult struct {
	Index           int       `json:"index"`
	EventDate       time.Time `json:"eventDate"`
	Result          string    `json:"result"`
	Stdout          *string   `json:"stdout,omitempty"`
	Stderr          *string   `json:"stderr,omitempty"`
	Message         *string   `json:"message,omitempty"`
	IsBatchFinished bool      `json:"isBatchFinished"`
}

func (s *Server) routeActivity(api func(string, http.HandlerFunc)) {
	api("POST "+activityPrefix+"/activity", s.createActivity)
	api("DELETE "+activityPrefix+"/activity/{id}", s.destroyActivity)
	api("POST "+activityPrefix+"/activity/{id}/exec", s.exec)
	api("GET "+activityPrefix+"/activity/{id}/exec/{batch}", s.batchResults)
	api("GET "+activityPrefix+"/activity/{id}/state", s.activityState)
	api("GET "+activityPrefix+"/activity/{id}/agreement", s.activityAgreement)
	api("GET "+activityPrefix+"/activity/{id}/usage", s.activityUsage)
}

func (s *Server) createActivity(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if !readJSON(w, r, &raw) {
		return
	}
	var agreementID string
	if err := json.Unmarshal(raw, &agreementID); err != nil {
		var body struct {
			AgreementID string `json:"agreementId"`
		}
		if err := json.Unmarshal(raw, &body); err != nil || body.AgreementID == "" {
			writeError(w, http.StatusBadRequest, "body must be {\"agreementId\": ...} or an agreement id string")
			return
		}
		agreementID = body.AgreementID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agreementOr404(w, agreementID)
	if !ok {
		return
	}
	if a.state != "Approved" {
		writeError(w, http.StatusBadRequest, "agreement %s is %s, not Approved", a.id, a.state)
		return
	}
	if s.unreachable(w, a.id) {
		return
	}
	ctx, cancel := context.WithCancel(s.bgCtx)
	act := &activity{id: newID(), agreementID: a.id, providerID: a.provider.id, state: "Initialized", created: s.now(), due: newAmount(),
		batches: map[string]*batch{}, nets: map[string]string{}, ctx: ctx, cancel: cancel}
	s.activities[act.id] = act
	s.notify()
	// 200, as yagna (core/activity/src/requestor/control.rs create_activity), in the request's shape.
	writeJSON(w, http.StatusOK, map[string]any{"activityId": act.id})
}

// activityOr404 is the activity id, or answers as yagna does for an id it does not know: 500 "DAO error:
// Not found: agreement id for activity: <id>" (every /activity/{id}... call first looks up the activity's
// agreement: core/activity/src/dao/activity.rs get_agreement_id → DaoError::NotFound, Error::Dao → 500 in
// core/activity/src/error.rs), not 404. The caller holds s.mu.
func (s *Server) activityOr404(w http.ResponseWriter, id string) (*activity, bool) {
	act, ok := s.activities[id]
	if !ok {
		writeError(w, http.StatusInternalServerError, "DAO error: Not found: agreement id for activity: %s", id)
	}
	return act, ok
}

func (s *Server) destroyActivity(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	act, ok := s.activityOr404(w, r.PathValue("id"))
	if !ok {
		s.mu.Unlock()
		return
	}
	if act.state != "Terminated" && s.unreachable(w, act.agreementID) {
		s.mu.Unlock()
		return
	}
	s.bill(act, time.Now())
	act.terminate("destroyed by the requestor", "")
	cid := act.containerID
	s.notify()
	s.mu.Unlock()
	if cid != "" {
		if err := s.removeContainers(r.Context(), []string{cid}); err != nil {
			// The activity is over either way; its container may still run, and the requestor hears why.
			writeError(w, http.StatusInternalServerError, "destroying activity %s: %v", act.id, err)
			return
		}
	}
	writeNull(w) // 200 null, as yagna (core/activity/src/requestor/control.rs destroy_activity)
}

// refreshLiveness turns an activity whose container died into Terminated.
func (s *Server) refreshLiveness(ctx context.Context, act *activity) {
	s.mu.Lock()
	cid, st := act.containerID, act.state
	s.mu.Unlock()
	if cid == "" || st == "Terminated" {
		return
	}
	alive, why := s.containerAlive(ctx, cid)
	if alive {
		return
	}
	s.mu.Lock()
	died := act.state != "Terminated"
	if died {
		s.bill(act, time.Now())
		act.terminate("activity died: "+why, why)
		s.log.Info("activity died", "activity", act.id, "why", why)
		s.notify()
	}
	s.mu.Unlock()
	if died {
		// Like a provider whose VM is gone: nothing of it stays, and its VPN address is free again.
		s.removeContainers(ctx, []string{cid})
	}
}

func (s *Server) activityState(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	act, ok := s.activityOr404(w, r.PathValue("id"))
	if ok && s.daoErrorLocked(w) {
		ok = false
	}
	// yagna answers a terminated activity's state from its own database and asks the provider for any
	// other (core/activity/src/api.rs get_activity_state_web).
	if ok && act.state != "Terminated" && s.unreachable(w, act.agreementID) {
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	s.refreshLiveness(r.Context(), act)
	s.mu.Lock()
	defer s.mu.Unlock()
	var next any
	if act.next != "" {
		next = act.next
	}
	out := map[string]any{"state": []any{act.state, next}}
	if act.reason != "" {
		out["reason"] = act.reason
	}
	if act.errMsg != "" {
		out["errorMessage"] = act.errMsg
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) activityAgreement(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if act, ok := s.activityOr404(w, r.PathValue("id")); ok {
		writeJSON(w, http.StatusOK, act.agreementID)
	}
}

func (s *Server) activityUsage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if act, ok := s.activityOr404(w, r.PathValue("id")); ok {
		if act.state != "Terminated" && s.unreachable(w, act.agreementID) {
			return
		}
		s.bill(act, time.Now())
		usage := act.usage
		if usage == nil {
			usage = []float64{0, 0}
		}
		writeJSON(w, http.StatusOK, map[string]any{"currentUsage": usage, "timestamp": time.Now().Unix()})
	}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Text *string `json:"text"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	if body.Text == nil {
		writeError(w, http.StatusBadRequest, "text (the ExeScript) is required")
		return
	}
	var cmds []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(*body.Text), &cmds); err != nil {
		writeError(w, http.StatusBadRequest, "text is not an ExeScript (a JSON array of commands): %v", err)
		return
	}
	for i, c := range cmds {
		if len(c) != 1 {
			writeError(w, http.StatusBadRequest, "command %d must have exactly one key (deploy, start, run, transfer, terminate, sign)", i)
			return
		}
		// yagna parses the ExeScript into ya-client-model's commands at exec: a deploy net without nodeIp
		// is a 400 there (core/activity/src/requestor/control.rs exec, serde "missing field").
		if arg, ok := c["deploy"]; ok {
			var d struct {
				Net []map[string]json.RawMessage `json:"net"`
			}
			if json.Unmarshal(arg, &d) == nil {
				for _, n := range d.Net {
					if _, ok := n["nodeIp"]; !ok {
						writeError(w, http.StatusBadRequest, "Bad request: Error(\"missing field `nodeIp`\", line: 1, column: 1)")
						return
					}
				}
			}
		}
	}
	s.mu.Lock()
	act, ok := s.activityOr404(w, r.PathValue("id"))
	if !ok {
		s.mu.Unlock()
		return
	}
	if act.state == "Terminated" {
		s.mu.Unlock()
		writeError(w, http.StatusInternalServerError, "activity %s is Terminated", act.id)
		return
	}
	if s.unreachable(w, act.agreementID) {
		s.mu.Unlock()
		return
	}
	b := &batch{id: newID(), cmds: cmds, trace: &BatchTrace{Posted: time.Now()}}
	act.batches[b.id] = b
	act.traces = append(act.traces, b.trace)
	s.mu.Unlock()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.runBatch(act, b, cmds)
	}()
	writeJSON(w, http.StatusOK, b.id)
}

func (s *Server) batchResults(w http.ResponseWriter, r *http.Request) {
	timeout, ok := pollTimeout(w, r)
	if !ok {
		return
	}
	index := -1
	if q := r.URL.Query().Get("commandIndex"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "commandIndex must be a non-negative integer")
			return
		}
		index = n
	}
	s.mu.Lock()
	act, ok := s.activityOr404(w, r.PathValue("id"))
	var b *batch
	if ok {
		if b = act.batches[r.PathValue("batch")]; b == nil {
			writeError(w, http.StatusNotFound, "batch %s not found in activity %s", r.PathValue("batch"), act.id)
			ok = false
		} else if s.unreachable(w, act.agreementID) {
			ok = false
		}
	}
	s.mu.Unlock()
	if !ok {
		return
	}
	if st := s.takeExecPollError(); st != 0 {
		writeUnreachable(w, st, "execPollErrors fault knob")
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		s.streamBatch(w, r, b)
		return
	}
	results := longPoll(s, r.Context(), timeout, func() ([]cmdResult, bool) {
		out := append([]cmdResult{}, b.results...)
		if b.finished {
			return out, true
		}
		return out, index >= 0 && len(out) > index
	})
	// With commandIndex, as the exe-unit (exe-unit/src/handlers/rpc.rs Handler<GetExecBatchResults>): a
	// command not reached within the timeout is RpcMessageError::Timeout, 408 {"message":"Timeout"}
	// (core/activity/src/error.rs), and the results go up to that command only.
	if index >= 0 {
		if len(results) <= index {
			writeError(w, http.StatusRequestTimeout, "Timeout")
			return
		}
		results = results[:index+1]
	}
	writeJSON(w, http.StatusOK, results)
}

// runBatch executes the commands one after another; an Error ends the batch.
func (s *Server) runBatch(act *activity, b *batch, cmds []map[string]json.RawMessage) {
	act.execMu.Lock()
	defer act.execMu.Unlock()
	for i, c := range cmds {
		var name string
		var arg json.RawMessage
		for k, v := range c {
			name, arg = k, v
		}
		res := cmdResult{Index: i, Result: "Ok"}
		started, st := time.Now(), &steps{}
		stdout, stderr, code, err := s.runCommand(withSteps(act.ctx, st), act, name, arg)
		if err != nil {
			res.Result = "Error"
			msg := err.Error()
			res.Message = &msg
		}
		res.Stdout, res.Stderr = stdout, stderr
		s.mu.Lock()
		res.EventDate = s.now()
		res.IsBatchFinished = err != nil || i == len(cmds)-1
		b.results = append(b.results, res)
		b.codes = append(b.codes, code)
		b.finished = res.IsBatchFinished
		b.trace.Commands = append(b.trace.Commands, CommandTrace{Name: name, Start: started, End: time.Now(), Steps: st.take()})
		s.notify()
		s.mu.Unlock()
		if err != nil {
			s.log.Info("exescript command failed", "activity", act.id, "index", i, "command", name, "err", err)
			return
		}
	}
	if len(cmds) == 0 {
		s.mu.Lock()
		b.finished = true
		s.notify()
		s.mu.Unlock()
	}
}

type captureMode struct {
	AtEnd  json.RawMessage `json:"atEnd"`
	Stream json.RawMessage `json:"stream"`
}

type runBody struct {
	EntryPoint string   `json:"entry_point"`
	Args       []string `json:"args"`
	Capture    *struct {
		Stdout *captureMode `json:"stdout"`
		Stderr *captureMode `json:"stderr"`
	} `json:"capture"`
}

// deployNet is one net[] entry of a deploy, as ya-client-model's Network (model/src/activity/
// exe_script_command.rs at the rev yagna pins): id, ip, mask?, gateway?, nodeIp (required), nodes (IP → node
// id, default empty).
type deployNet struct {
	ID      string            `json:"id"`
	IP      string            `json:"ip"`
	Mask    *string           `json:"mask"`
	Gateway *string           `json:"gateway"`
	NodeIP  *string           `json:"nodeIp"`
	Nodes   map[string]string `json:"nodes"`
}

type deployBody struct {
	Net   []deployNet       `json:"net"`
	Hosts map[string]string `json:"hosts"`
}

// checkDeployNets reads net[] as the exe-unit does (exe-unit/src/state.rs Deployment::extend_networks):
// ip by to_net (CIDR, or a bare address and the mask, /24 without one), nodeIp and gateway by
// IpAddr::from_str, the nodes' keys by map_nodes → to_ip (bare addresses, not loopback, unspecified,
// multicast or broadcast: utils/networking/src/vpn/common.rs). A failure fails the deploy with the
// exe-unit's "Net error: …" (the VPN error's Display, from ya-relay-stack).
func checkDeployNets(nets []deployNet) error {
	const badIP = "Net error: Invalid IP address: invalid IP address syntax"
	for _, n := range nets {
		if strings.Contains(n.IP, "/") {
			if _, err := netip.ParsePrefix(n.IP); err != nil {
				return fmt.Errorf("Net error: Invalid network IP address: %s", n.IP)
			}
		} else if _, err := netip.ParseAddr(n.IP); err != nil {
			return errors.New(badIP)
		} else if n.Mask != nil {
			if m, err := netip.ParseAddr(*n.Mask); err != nil || !m.Is4() {
				return errors.New(badIP)
			}
		}
		if n.NodeIP != nil {
			if _, err := netip.ParseAddr(*n.NodeIP); err != nil {
				return errors.New(badIP)
			}
		}
		if n.Gateway != nil {
			if _, err := netip.ParseAddr(*n.Gateway); err != nil {
				return errors.New(badIP)
			}
		}
		for k := range n.Nodes {
			a, err := netip.ParseAddr(k)
			if err != nil {
				return errors.New(badIP)
			}
			if a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
				return fmt.Errorf("Net error: IP address not allowed: %s", a)
			}
		}
	}
	return nil
}

// runCommand runs one command of a batch; ctx is the activity's, carrying the command's steps (trace.go).
func (s *Server) runCommand(ctx context.Context, act *activity, name string, arg json.RawMessage) (stdout, stderr *string, code int, err error) {
	stdout, stderr, err = s.runCommandOut(ctx, act, name, arg, &code)
	if err != nil && code == 0 {
		code = -1
	}
	return stdout, stderr, code, err
}

func (s *Server) runCommandOut(ctx context.Context, act *activity, name string, arg json.RawMessage, exit *int) (stdout, stderr *string, err error) {
	s.mu.Lock()
	state := act.state
	s.mu.Unlock()
	if state == "Terminated" {
		return nil, nil, fmt.Errorf("activity is Terminated")
	}
	switch name {
	case "deploy":
		var d deployBody
		if err := json.Unmarshal(arg, &d); err != nil {
			return nil, nil, fmt.Errorf("deploy: %w", err)
		}
		if err := checkDeployNets(d.Net); err != nil {
			return nil, nil, err
		}
		return nil, nil, s.deploy(ctx, act, d)
	case "start":
		if state != "Deployed" {
			return nil, nil, fmt.Errorf("start: activity is %s, deploy it first", state)
		}
		if err := s.docker.ContainerStart(ctx, act.containerID, container.StartOptions{}); err != nil {
			return nil, nil, fmt.Errorf("start: starting container: %w", err)
		}
		if err := s.joinVPNs(ctx, act); err != nil {
			return nil, nil, fmt.Errorf("start: %w", err)
		}
		if args, err := startArgs(arg); err != nil {
			return nil, nil, err
		} else if err := s.runEntrypoint(ctx, act, args); err != nil {
			return nil, nil, fmt.Errorf("start: %w", err)
		}
		s.mu.Lock()
		act.state, act.readySince, act.lastNoteAt = "Ready", time.Now(), time.Now()
		s.notify()
		s.mu.Unlock()
		return nil, nil, nil
	case "run":
		var rb runBody
		if err := json.Unmarshal(arg, &rb); err != nil || rb.EntryPoint == "" {
			return nil, nil, fmt.Errorf("run: entry_point is required")
		}
		if state != "Ready" {
			return nil, nil, fmt.Errorf("run: activity is %s, not Ready", state)
		}
		so, se, code, err := s.execIn(ctx, act.containerID, append([]string{rb.EntryPoint}, rb.Args...))
		*exit = code
		if rb.Capture != nil && rb.Capture.Stdout != nil {
			stdout = &so
		}
		if rb.Capture != nil && rb.Capture.Stderr != nil {
			stderr = &se
		}
		if err != nil {
			return stdout, stderr, fmt.Errorf("run: %w", err)
		}
		if code != 0 {
			msg := fmt.Sprintf("ExeScript command exited with code %d", code)
			if tail := strings.TrimSpace(se); tail != "" && stderr == nil {
				msg += ": " + lastLines(tail, 5)
			}
			return stdout, stderr, fmt.Errorf("%s", msg)
		}
		return stdout, stderr, nil
	case "terminate":
		s.mu.Lock()
		s.bill(act, time.Now())
		act.terminate("terminated by the ExeScript terminate command", "")
		cid := act.containerID
		s.notify()
		s.mu.Unlock()
		if cid != "" {
			s.removeContainers(context.Background(), []string{cid})
		}
		return nil, nil, nil
	case "transfer", "sign":
		return nil, nil, fmt.Errorf("%s is not supported by the devnet", name)
	default:
		return nil, nil, fmt.Errorf("unknown ExeScript command %q", name)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// deploy creates the activity's container from the image its task package hash maps to, joined to the
// requested VPNs with exactly their node IPs.
func (s *Server) deploy(ctx context.Context, act *activity, d deployBody) error {
	s.mu.Lock()
	if act.state != "Initialized" {
		st := act.state
		s.mu.Unlock()
		return fmt.Errorf("deploy: activity is %s, already deployed", st)
	}
	a := s.agreements[act.agreementID]
	caps := a.provider.cfg.Capabilities
	relax := s.cfg.Relax.Capabilities
	tp := taskPackageOf(a.demandProps, relax || slices.Contains(caps, "manifest-support"))
	var attaches []vpnAddr
	// The exe-unit starts the VPN endpoint only when the offer lists the vpn capability
	// (exe-unit/src/manifest.rs build_default_features, exe-unit/src/runtime/process.rs): elsewhere the
	// deploy succeeds and the VM is on no network.
	nets := d.Net
	if !relax && !slices.Contains(caps, "vpn") {
		if len(nets) > 0 {
			s.log.Info("deploy: provider has no vpn capability, the VM joins no network", "provider", a.provider.name, "activity", act.id)
		}
		nets = nil
	}
	for _, n := range nets {
		v, ok := s.networks[n.ID]
		if !ok {
			s.mu.Unlock()
			return fmt.Errorf("deploy: network %s not found", n.ID)
		}
		ip := ""
		if n.NodeIP != nil {
			ip = *n.NodeIP
		}
		if ip == "" && len(v.nodes[act.providerID]) > 0 {
			ip = v.nodes[act.providerID][0]
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil || !v.prefix.Contains(addr) {
			s.mu.Unlock()
			return fmt.Errorf("deploy: node IP %q is not in network %s (%s)", ip, v.id, v.prefix)
		}
		// yagna routes the VPN's traffic by the requestor's node map: an address held there by another
		// node never reaches this one.
		if who, used := v.inUse(addr.String()); used && !slices.Contains(v.nodes[act.providerID], addr.String()) {
			s.mu.Unlock()
			return fmt.Errorf("deploy: node IP %s is held by %s in network %s's node map: its traffic would go there, not to this provider", addr, who, v.id)
		}
		attaches = append(attaches, vpnAddr{vpnID: v.id, addr: addr, bits: v.prefix.Bits()})
	}
	name := fmt.Sprintf("gcompose-devnet-%s-%s", s.cfg.Instance, act.id[:12])
	labels := s.labels(map[string]string{labelInstance + ".activity": act.id, labelInstance + ".agreement": a.id, labelInstance + ".provider": a.provider.name})
	hostname := a.provider.name
	s.mu.Unlock()

	hash, err := imageHash(tp)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	// A real provider downloads the image first: minutes for a large one.
	s.mu.Lock()
	download := s.faults.ImageDownload.Duration
	s.mu.Unlock()
	if download > 0 {
		select {
		case <-time.After(download):
		case <-ctx.Done():
			return fmt.Errorf("deploy: activity was terminated during the image download")
		}
	}
	if s.takeDeployError() {
		// A provider's own failure, worded with what is its own (a real one names its paths, its
		// connection), so that the requestor can tell it from a payload failing the same way everywhere.
		return fmt.Errorf("deploy: image download failed on %s: %s (devnet fault knob deployErrors)", a.provider.name, tp)
	}
	if err := checkDownload(tp, hash); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	img, err := s.resolveImage(ctx, hash)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	var extraHosts []string
	for h, ip := range d.Hosts {
		extraHosts = append(extraHosts, h+":"+ip)
	}
	// No network but the VPNs (vpnrelay.go): a TUN device per VPN, which takes /dev/net/tun and
	// NET_ADMIN in the container's own network namespace (a VM on a real provider is root in its own
	// kernel anyway), and the relay's socket directory.
	hc := &container.HostConfig{NetworkMode: "none", ExtraHosts: extraHosts}
	// The limits a VM's init gets from its kernel, not the engine's: an engine that asks for more than its
	// own hard limits (rootful Podman asks nofile 1048576 and a high nproc) fails every start where it
	// cannot raise them ("error setting rlimit type 7: operation not permitted").
	hc.Ulimits = payloadUlimits()
	if len(attaches) > 0 {
		if s.relay.err != nil {
			return fmt.Errorf("deploy: %w", s.relay.err)
		}
		hc.CapAdd = []string{"NET_ADMIN"}
		hc.Devices = []container.DeviceMapping{{PathOnHost: "/dev/net/tun", PathInContainer: "/dev/net/tun", CgroupPermissions: "rwm"}}
	}
	if len(attaches) > 0 || s.initShared != "" {
		// The relay's socket, and devnet-init when it runs from there (initshare.go).
		hc.Mounts = []mount.Mount{s.relay.mnt}
	}
	cfg := &container.Config{Image: img, Labels: labels, Hostname: hostname}
	entry, err := s.payloadConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	// Not cancelled with the activity: a cancelled request does not stop the
	// Engine, which would create the container anyway and leave it to nobody.
	// An activity ended meanwhile is seen below, and its container removed.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := s.docker.ContainerCreate(cctx, cfg, hc, &network.NetworkingConfig{}, name)
	cancel()
	if err != nil {
		return fmt.Errorf("deploy: creating container from image %s: %w", img, err)
	}
	if err := s.injectInit(context.WithoutCancel(ctx), created.ID); err != nil {
		s.removeContainers(context.Background(), []string{created.ID})
		return fmt.Errorf("deploy: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if act.state == "Terminated" {
		go s.removeContainers(context.Background(), []string{created.ID})
		return fmt.Errorf("deploy: activity was terminated meanwhile")
	}
	act.containerID = created.ID
	act.entrypoint = entry
	act.state = "Deployed"
	act.vpnAddrs = attaches
	for _, at := range attaches {
		act.nets[at.vpnID] = at.addr.String()
	}
	s.notify()
	return nil
}

// streamBatch is the text/event-stream variant of the batch results: for each command, RuntimeEvents
// "started", "stdout", "stderr" (when captured) and "finished" {returnCode, message}, as "event: runtime".
func (s *Server) streamBatch(w http.ResponseWriter, r *http.Request, b *batch) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	sent := 0
	for {
		type item struct {
			res  cmdResult
			code int
			cmd  map[string]json.RawMessage
		}
		var items []item
		var finished bool
		longPoll(s, r.Context(), 30*time.Second, func() (struct{}, bool) {
			items = items[:0]
			for i := sent; i < len(b.results); i++ {
				items = append(items, item{b.results[i], b.codes[i], b.cmds[b.results[i].Index]})
			}
			finished = b.finished
			return struct{}{}, len(items) > 0 || finished
		})
		if r.Context().Err() != nil {
			return
		}
		for _, it := range items {
			ts := it.res.EventDate.Format(time.RFC3339Nano)
			emit := func(kind map[string]any) {
				data, _ := json.Marshal(map[string]any{"batchId": b.id, "index": it.res.Index, "timestamp": ts, "kind": kind})
				fmt.Fprintf(w, "event: runtime\ndata: %s\n\n", data)
			}
			emit(map[string]any{"started": map[string]any{"command": it.cmd}})
			if it.res.Stdout != nil {
				emit(map[string]any{"stdout": map[string]any{"str": *it.res.Stdout}})
			}
			if it.res.Stderr != nil {
				emit(map[string]any{"stderr": map[string]any{"str": *it.res.Stderr}})
			}
			fin := map[string]any{"returnCode": it.code}
			if it.res.Message != nil {
				fin["message"] = *it.res.Message
			}
			emit(map[string]any{"finished": fin})
		}
		sent += len(items)
		flusher.Flush()
		if finished && sent == len(b.results) {
			return
		}
	}
}

// taskPackageOf returns what names the image: golem.srv.comp.task_package, or else, on a provider
// with manifest support, the computation manifest (golem.srv.comp.payload, base64 JSON whose payload
// carries "hash": "sha3:<hex>").
func taskPackageOf(props map[string]any, manifests bool) string {
	if tp, ok := props["golem.srv.comp.task_package"].(string); ok && tp != "" {
		return tp
	}
	if m, ok := props["golem.srv.comp.payload"].(string); ok && manifests {
		if b, err := base64.StdEncoding.DecodeString(m); err == nil {
			return string(b)
		}
	}
	return ""
}
