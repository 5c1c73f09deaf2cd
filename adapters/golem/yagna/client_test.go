package yagna

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "s3cr3t-app-key"

func TestFromEnvFunc(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantURL string
		wantErr string
	}{
		{"defaults", map[string]string{"YAGNA_APPKEY": "k"}, DefaultURL, ""},
		{"override", map[string]string{"YAGNA_APPKEY": "k", "YAGNA_API_URL": "http://yagna:7465/"}, "http://yagna:7465", ""},
		{"no key", map[string]string{}, "", "YAGNA_APPKEY"},
		{"bad url", map[string]string{"YAGNA_APPKEY": "k", "YAGNA_API_URL": "yagna:7465"}, "", "YAGNA_API_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnvFunc(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.BaseURL != tt.wantURL || c.AppKey != "k" {
				t.Fatalf("client = %s key %q", c.BaseURL, c.AppKey)
			}
		})
	}
}

func TestClientNeverPrintsKey(t *testing.T) {
	c := New("http://x", testKey)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c)} {
		if strings.Contains(s, testKey) {
			t.Fatalf("client formatting leaks the key: %s", s)
		}
	}
}

func TestAuthAndErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"message":"bad key"}`)
			return
		}
		switch r.URL.Path {
		case "/me":
			_, _ = io.WriteString(w, `{"identity":"0xabc","name":"req","role":"manager"}`)
		case "/net-api/v1/net/gone":
			w.WriteHeader(http.StatusNotFound)
			// a server that echoes the key must not make us leak it
			_, _ = io.WriteString(w, `{"message":"no network for key `+testKey+`"}`)
		case "/market-api/v1/agreements/a1/wait":
			w.WriteHeader(http.StatusRequestTimeout)
			_, _ = io.WriteString(w, `not json`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	c := New(srv.URL, testKey)
	id, err := c.Me(ctx)
	if err != nil || id.Identity != "0xabc" {
		t.Fatalf("Me = %+v, %v", id, err)
	}

	_, err = c.GetNetwork(ctx, "gone")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Method != "GET" || ae.Path != "/net-api/v1/net/gone" {
		t.Fatalf("GetNetwork error = %#v", err)
	}
	if !IsNotFound(err) || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("error = %q", err)
	}

	err = c.WaitForApproval(ctx, "a1", 2*time.Second)
	if !IsTimeout(err) || !strings.Contains(err.Error(), "not json") {
		t.Fatalf("WaitForApproval error = %v", err)
	}

	bad := New(srv.URL, "wrong")
	if _, err := bad.Me(ctx); StatusOf(err) != 401 || !strings.Contains(err.Error(), "bad key") {
		t.Fatalf("unauthorized error = %v", err)
	}
}

// TestProblemDetailShownInFull: yagna answers an allocation beyond the funds
// with an RFC 7807 body (core/payment/src/api/allocations/api_error.rs) whose
// detail is longer than the 200 characters a plain body is cut to; the error
// shows it whole, with the facts of the extension members.
func TestProblemDetailShownInFull(t *testing.T) {
	const detail = "Insufficient funds to create the allocation. Top up your account or release all existing allocations to unlock the funds via `yagna payment release-allocations`. " +
		"This sentence makes the detail longer than two hundred characters, which a plain body would lose."
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": "/payment-api/v1/allocations/validation-error", "instance": "/payment-api/v1/allocations/validation-error/insufficient-account-funds",
			"detail": detail, "requestedFunds": "5", "availableFunds": "0.5", "reservedFunds": "0", "paymentPlatform": "erc20-holesky-tglm",
			"address": "0xabc", "requestBody": map[string]any{"totalAmount": "5", "note": "key " + testKey},
		})
	}))
	defer srv.Close()
	_, err := New(srv.URL, testKey).CreateAllocation(context.Background(), NewAllocation{TotalAmount: "5"})
	if StatusOf(err) != 400 || !IsProblem(err, "insufficient-account-funds") {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{detail, "availableFunds 0.5", "requestedFunds 5", "paymentPlatform erc20-holesky-tglm", "address 0xabc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "requestBody") || strings.Contains(err.Error(), testKey) {
		t.Errorf("error shows our own request body: %v", err)
	}
}

func TestTransportErrorRedactedAndRetried(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, `[]`)
	}))
	defer srv.Close()
	c := New(srv.URL, testKey)
	nets, err := c.Networks(context.Background())
	if err != nil || len(nets) != 0 || calls.Load() != 3 {
		t.Fatalf("Networks = %v, %v after %d calls", nets, err, calls.Load())
	}

	// POSTs are never retried
	calls.Store(0)
	_, err = c.CreateNetwork(context.Background(), NewNetwork{IP: "10.0.0.0", Mask: "255.255.255.0"})
	if StatusOf(err) != 503 || calls.Load() != 1 {
		t.Fatalf("CreateNetwork err = %v after %d calls", err, calls.Load())
	}

	// a base URL holding the key (never do this) still does not leak it
	c2 := New("http://127.0.0.1:1/"+testKey, testKey)
	c2.Retries = -1
	_, err = c2.Me(context.Background())
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("transport error = %v", err)
	}
}

func TestCreateActivityAnswerForms(t *testing.T) {
	tests := []struct {
		name, body string
		want       string
		wantErr    bool
	}{
		{"object", `{"activityId":"act-1"}`, "act-1", false},
		{"object with credentials", `{"activityId":"act-2","credentials":{"sgx":{"enclavePubKey":"aa","requestorPubKey":"bb","payloadHash":"h","iasReport":"r","iasSig":"cc"}}}`, "act-2", false},
		{"bare string", `"act-3"`, "act-3", false},
		{"empty object", `{}`, "", true},
		{"garbage", `[1]`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var req CreateActivityRequest
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.AgreementID != "agr" {
					w.WriteHeader(400)
					return
				}
				w.WriteHeader(201)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			res, err := New(srv.URL, testKey).CreateActivity(context.Background(), "agr")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v", err)
			}
			if res.ActivityID != tt.want {
				t.Fatalf("activity = %q, want %q", res.ActivityID, tt.want)
			}
		})
	}
}

func TestWaitBatch(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("timeout") != "0.5" {
			t.Errorf("timeout = %q", r.URL.Query().Get("timeout"))
		}
		switch polls.Add(1) {
		case 1:
			_, _ = io.WriteString(w, `[]`)
		case 2:
			w.WriteHeader(408)
			_, _ = io.WriteString(w, `{"message":"timeout"}`)
		case 3:
			_, _ = io.WriteString(w, `[{"index":0,"eventDate":"2026-01-01T00:00:00Z","result":"Ok","stdout":null,"isBatchFinished":false}]`)
		default:
			_, _ = io.WriteString(w, `[{"index":0,"eventDate":"2026-01-01T00:00:00Z","result":"Ok","stdout":"hi\n"},`+
				`{"index":1,"eventDate":"2026-01-01T00:00:01Z","result":"Error","stderr":"boom","message":"exit 1","isBatchFinished":true}]`)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := New(srv.URL, testKey).WaitBatch(ctx, "act", "b1", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Stdout != "hi\n" {
		t.Fatalf("results = %+v", res)
	}
	e, ok := FirstError(res)
	if !ok || e.Stderr != "boom" || e.Index != 1 {
		t.Fatalf("FirstError = %+v, %v", e, ok)
	}
}

func TestWaitBatchStopsWithContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `[]`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := New(srv.URL, testKey).WaitBatch(ctx, "act", "b1", 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

func TestTCPURL(t *testing.T) {
	tests := []struct {
		base, net, ip string
		port          int
		want, wantErr string
	}{
		{"http://127.0.0.1:7465", "n1", "192.168.0.2", 80, "ws://127.0.0.1:7465/net-api/v1/net/n1/tcp/192.168.0.2/80", ""},
		{"https://yagna.example/base/", "n 1", "10.0.0.3", 5432, "wss://yagna.example/base/net-api/v1/net/n%201/tcp/10.0.0.3/5432", ""},
		{"http://h", "n", "10.0.0.3", 0, "", "out of range"},
		{"http://h", "n", "not-an-ip", 80, "", "not an IP"},
		{"ftp://h", "n", "10.0.0.3", 80, "", "scheme"},
	}
	for _, tt := range tests {
		got, err := New(tt.base, testKey).TCPURL(tt.net, tt.ip, tt.port)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("TCPURL(%q) err = %v, want %q", tt.base, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("TCPURL = %q, %v; want %q", got, err, tt.want)
		}
		if strings.Contains(got, testKey) {
			t.Errorf("URL carries the key")
		}
	}
}

func TestReasonJSON(t *testing.T) {
	b, err := json.Marshal(TerminationReason("done"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"golem.requestor.code":"Success","message":"done"}` {
		t.Fatalf("reason = %s", b)
	}
	var r Reason
	if err := json.Unmarshal(b, &r); err != nil || r.Message != "done" || r.Extra["golem.requestor.code"] != "Success" {
		t.Fatalf("decoded %+v, %v", r, err)
	}
	if err := json.Unmarshal([]byte(`{"message":1}`), &r); err == nil {
		t.Fatal("numeric message accepted")
	}
}

func TestActivityStateJSON(t *testing.T) {
	var s ActivityState
	if err := json.Unmarshal([]byte(`{"state":["Ready",null],"reason":"x"}`), &s); err != nil {
		t.Fatal(err)
	}
	if s.Current() != StateReady || s.Next() != "" {
		t.Fatalf("state = %v %v", s.Current(), s.Next())
	}
	b, _ := json.Marshal(NewActivityState(StateDeployed, StateReady))
	if string(b) != `{"state":["Deployed","Ready"]}` {
		t.Fatalf("marshal = %s", b)
	}
	b, _ = json.Marshal(NewActivityState(StateTerminated, ""))
	if string(b) != `{"state":["Terminated",null]}` {
		t.Fatalf("marshal = %s", b)
	}
}

func TestPaymentPlatformJSON(t *testing.T) {
	for _, in := range []string{`"erc20-holesky-tglm"`, `{"driver":"erc20","network":"holesky","token":"tGLM"}`} {
		var p PaymentPlatform
		if err := json.Unmarshal([]byte(in), &p); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		if string(b) != in {
			t.Fatalf("round trip %s -> %s", in, b)
		}
	}
}

func TestExeScriptRoundTrip(t *testing.T) {
	script, err := ExeScript(
		ExeScriptCommand{Deploy: &DeployCommand{Net: []DeployNetwork{{ID: "n", IP: "192.168.0.0", Mask: "255.255.255.0", NodeIP: "192.168.0.2", Nodes: map[string]string{"192.168.0.1": "0xr"}}}}},
		ExeScriptCommand{Start: &StartCommand{Args: []string{}}},
		ExeScriptCommand{Run: &RunCommand{EntryPoint: "/bin/sh", Args: []string{"-c", "echo hi"}, Capture: CaptureAtEndString()}},
	)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"deploy":{"net":[{"id":"n","ip":"192.168.0.0","mask":"255.255.255.0","nodeIp":"192.168.0.2","nodes":{"192.168.0.1":"0xr"}}]}},` +
		`{"start":{"args":[]}},` +
		`{"run":{"entry_point":"/bin/sh","args":["-c","echo hi"],"capture":{"stdout":{"atEnd":{"format":"string"}},"stderr":{"atEnd":{"format":"string"}}}}}]`
	if script.Text != want {
		t.Fatalf("script\n got %s\nwant %s", script.Text, want)
	}
	cmds, err := parseExeScript(script.Text)
	if err != nil || len(cmds) != 3 || cmds[2].Run.Args[1] != "echo hi" {
		t.Fatalf("parseExeScript = %+v, %v", cmds, err)
	}
	for _, bad := range []string{`[{}]`, `[{"start":{},"run":{"entry_point":"x"}}]`, `[{"run":{}}]`, `[{"fly":{}}]`, `{}`} {
		if _, err := parseExeScript(bad); err == nil {
			t.Errorf("parseExeScript(%s) accepted", bad)
		}
	}
}

// parseExeScript decodes an ExeScriptRequest's text as a strict server
// would: what the client encodes must come back whole.
func parseExeScript(text string) ([]ExeScriptCommand, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.DisallowUnknownFields()
	var cmds []ExeScriptCommand
	if err := dec.Decode(&cmds); err != nil {
		return nil, fmt.Errorf("decoding exe script: %w", err)
	}
	for i, c := range cmds {
		n := 0
		for _, set := range []bool{c.Deploy != nil, c.Start != nil, c.Run != nil, c.Transfer != nil, c.Sign != nil, c.Terminate != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return nil, fmt.Errorf("exe script command %d: want exactly one of deploy, start, run, transfer, sign, terminate; got %d", i, n)
		}
		if c.Run != nil && c.Run.EntryPoint == "" {
			return nil, fmt.Errorf("exe script command %d: run without entry_point", i)
		}
	}
	return cmds, nil
}
