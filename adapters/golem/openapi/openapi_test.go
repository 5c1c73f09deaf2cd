package openapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func spec(t *testing.T) *Spec {
	t.Helper()
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLoadFromDirectory(t *testing.T) {
	s, err := Load(os.DirFS("testdata/specs"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Operations()); n < 80 {
		t.Fatalf("%d operations loaded", n)
	}
	if _, err := Load(os.DirFS(t.TempDir())); err == nil {
		t.Fatal("empty directory loaded")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/a.yaml", []byte("paths:\n  /x:\n    get:\n      responses:\n        200:\n          $ref: 'missing.yaml#/x'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(os.DirFS(dir)); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("dangling $ref: err = %v", err)
	}
}

func TestFind(t *testing.T) {
	s := spec(t)
	tests := []struct {
		method, path string
		wantID       string
		wantParams   map[string]string
		wantErr      string
	}{
		{"GET", "/payment-api/v1/payments/status", "paymentsStatus", map[string]string{}, ""},
		{"GET", "/payment-api/v1/payments/p1", "getPayment", map[string]string{"paymentId": "p1"}, ""},
		{"GET", "/payment-api/v1/payments/a+b%2Fc", "getPayment", map[string]string{"paymentId": "a+b/c"}, ""}, // "+" is literal in a path
		{"GET", "/payment-api/v1/payments/%zz", "", nil, "no such path"},
		{"POST", "/market-api/v1/demands/s%201/proposals/p2", "counterProposalDemand", map[string]string{"subscriptionId": "s 1", "proposalId": "p2"}, ""},
		{"GET", "/net-api/v1/net/n1/tcp/10.0.0.2/80", "connect_tcp", map[string]string{"networkId": "n1", "ip": "10.0.0.2", "port": "80"}, ""},
		{"get", "/me", "getIdentity", map[string]string{}, ""},
		{"PATCH", "/me", "", nil, "method not in the spec"},
		{"GET", "/market-api/v1/nope", "", nil, "no such path"},
		{"GET", "/market-api/v1/agreements//", "", nil, "no such path"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			op, params, err := s.Find(tt.method, tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if op.ID != tt.wantID {
				t.Fatalf("op = %s, want %s", op.ID, tt.wantID)
			}
			for k, v := range tt.wantParams {
				if params[k] != v {
					t.Fatalf("param %s = %q, want %q", k, params[k], v)
				}
			}
		})
	}
}

func TestCheckRequest(t *testing.T) {
	s := spec(t)
	tests := []struct {
		name, method, target, body string
		want                       []string // substrings of problems; none = valid
	}{
		{"demand", "POST", "/market-api/v1/demands", `{"properties":{"a.b":1},"constraints":"(a=1)"}`, nil},
		{"demand missing constraints", "POST", "/market-api/v1/demands", `{"properties":{}}`, []string{`required member "constraints"`}},
		{"demand wrong type", "POST", "/market-api/v1/demands", `{"properties":[],"constraints":"()"}`, []string{"$.properties: array where object"}},
		{"demand misspelled member", "POST", "/market-api/v1/demands", `{"properties":{},"constraints":"()","constraint":"x"}`, []string{"$.constraint: member not declared"}},
		{"demand no body", "POST", "/market-api/v1/demands", ``, []string{"required body is missing"}},
		{"demand not json", "POST", "/market-api/v1/demands", `{`, []string{"not JSON"}},
		{"events", "GET", "/market-api/v1/demands/s1/events?timeout=2.5&maxEvents=10", ``, nil},
		{"events bad timeout", "GET", "/market-api/v1/demands/s1/events?timeout=soon", ``, []string{`"soon" is not a number`}},
		{"events negative timeout", "GET", "/market-api/v1/demands/s1/events?timeout=-1", ``, []string{"below the minimum"}},
		{"events maxEvents too big", "GET", "/market-api/v1/demands/s1/events?maxEvents=101", ``, []string{"above the maximum"}},
		{"events maxEvents float", "GET", "/market-api/v1/demands/s1/events?maxEvents=1.5", ``, []string{"not an integer"}},
		{"events unknown param", "GET", "/market-api/v1/demands/s1/events?limit=3", ``, []string{`"limit" is not declared`}},
		{"get with body", "GET", "/me", `{}`, []string{"declares none"}},
		{"agreement", "POST", "/market-api/v1/agreements", `{"proposalId":"p","validTo":"2026-11-22T10:00:00.123Z"}`, nil},
		{"agreement bad date", "POST", "/market-api/v1/agreements", `{"proposalId":"p","validTo":"tomorrow"}`, []string{"RFC 3339"}},
		{"agreement list state enum", "GET", "/market-api/v1/agreements?state=Approved&afterDate=2026-01-01T00:00:00Z", ``, nil},
		{"agreement list bad state", "GET", "/market-api/v1/agreements?state=Happy", ``, []string{"is not one of"}},
		{"terminate reason extra members", "POST", "/market-api/v1/agreements/a/terminate", `{"message":"bye","golem.requestor.code":"Success"}`, nil},
		{"terminate without message", "POST", "/market-api/v1/agreements/a/terminate", `{"golem.requestor.code":"Success"}`, []string{`required member "message"`}},
		{"reject without body", "POST", "/market-api/v1/demands/s/proposals/p/reject", ``, nil},
		{"activity object", "POST", "/activity-api/v1/activity", `{"agreementId":"a"}`, nil},
		{"activity bare string", "POST", "/activity-api/v1/activity", `"a"`, nil},
		{"activity wrong", "POST", "/activity-api/v1/activity", `{"agreement":"a"}`, []string{"none of oneOf"}},
		{"exec", "POST", "/activity-api/v1/activity/x/exec", `{"text":"[]"}`, nil},
		{"batch", "GET", "/activity-api/v1/activity/x/exec/b?timeout=5&commandIndex=2", ``, nil},
		{"batch bad index", "GET", "/activity-api/v1/activity/x/exec/b?commandIndex=1.5", ``, []string{"not an integer"}},
		{"allocation", "POST", "/payment-api/v1/allocations", `{"paymentPlatform":"erc20-holesky-tglm","totalAmount":"1","makeDeposit":false,"timeout":"2026-11-23T00:00:00Z"}`, nil},
		{"allocation platform object", "POST", "/payment-api/v1/allocations", `{"paymentPlatform":{"driver":"erc20","network":"holesky"},"totalAmount":"1"}`, nil},
		{"allocation sends readOnly", "POST", "/payment-api/v1/allocations", `{"totalAmount":"1","spentAmount":"0"}`, []string{"$.spentAmount: readOnly member sent"}},
		{"allocation amount as number", "POST", "/payment-api/v1/allocations", `{"totalAmount":1}`, []string{"$.totalAmount: integer where string"}},
		{"decorations", "GET", "/payment-api/v1/demandDecorations?allocationIds=a,b", ``, nil},
		{"decorations missing ids", "GET", "/payment-api/v1/demandDecorations", ``, []string{`required parameter "allocationIds"`}},
		{"accept debit note", "POST", "/payment-api/v1/debitNotes/d/accept?timeout=5", `{"totalAmountAccepted":"0.1","allocationId":"al"}`, nil},
		{"accept debit note missing allocation", "POST", "/payment-api/v1/debitNotes/d/accept", `{"totalAmountAccepted":"0.1"}`, []string{`"allocationId" is missing`}},
		{"debit note events", "GET", "/payment-api/v1/debitNoteEvents?timeout=0&afterTimestamp=2026-01-01T00:00:00.5Z&maxEvents=5", ``, nil},
		{"debit note events bad ts", "GET", "/payment-api/v1/debitNoteEvents?afterTimestamp=yesterday", ``, []string{"RFC 3339"}},
		{"network", "POST", "/net-api/v1/net", `{"ip":"192.168.0.0","mask":"255.255.255.0"}`, nil},
		{"network null gateway", "POST", "/net-api/v1/net", `{"ip":"192.168.0.0","gateway":null}`, []string{"null where string"}},
		{"node", "POST", "/net-api/v1/net/n/nodes", `{"id":"0xp","ip":"192.168.0.2"}`, nil},
		{"tcp port", "GET", "/net-api/v1/net/n/tcp/10.0.0.2/0", ``, []string{"below the minimum"}},
		{"tcp port text", "GET", "/net-api/v1/net/n/tcp/10.0.0.2/http", ``, []string{"not an integer"}},
		{"unknown path", "GET", "/market-api/v2/demands", ``, []string{"no such path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			assertProblems(t, s.CheckRequest(tt.method, tt.target, body), tt.want)
		})
	}
}

func assertProblems(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected violations: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no violations, want %q", want)
	}
	var v *Violations
	if !errors.As(err, &v) {
		t.Fatalf("error %T is not *Violations", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("violations %q do not mention %q", err, w)
		}
	}
}

const (
	proposal = `{"properties":{"golem.inf.cpu.cores":4},"constraints":"()","proposalId":"p","issuerId":"0xp","state":"Initial","timestamp":"2026-11-22T10:00:00Z"}`
	demand   = `{"properties":{},"constraints":"()","demandId":"d","requestorId":"0xr","timestamp":"2026-11-22T10:00:00Z"}`
	offer    = `{"properties":{"golem.node.id.name":"p1"},"constraints":"()","offerId":"o","providerId":"0xp","timestamp":"2026-11-22T10:00:00Z"}`
)

func TestCheckResponse(t *testing.T) {
	s := spec(t)
	tests := []struct {
		name, method, target string
		status               int
		body                 string
		want                 []string
	}{
		{"subscription id", "POST", "/market-api/v1/demands", 201, `"sub-1"`, nil},
		{"subscription id as object", "POST", "/market-api/v1/demands", 201, `{"id":"sub-1"}`, []string{"object where string"}},
		{"undocumented success", "POST", "/market-api/v1/demands", 200, `"sub-1"`, []string{"200 is not documented"}},
		{"documented error", "POST", "/market-api/v1/demands", 400, `{"message":"bad"}`, nil},
		{"default error", "POST", "/market-api/v1/demands", 503, `{"message":"busy"}`, nil},
		{"error wrong shape", "POST", "/market-api/v1/demands", 400, `{"message":1}`, []string{"integer where string"}},
		{"401 on a secured op", "POST", "/activity-api/v1/activity", 401, `{"message":"no key"}`, nil},
		{"undocumented error", "POST", "/activity-api/v1/activity", 409, `{"message":"x"}`, []string{"409 is not documented"}},
		{"proposal event", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"ProposalEvent","eventDate":"2026-11-22T10:00:00Z","proposal":` + proposal + `}]`, nil},
		{"proposal event bad state", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"ProposalEvent","eventDate":"2026-11-22T10:00:00Z","proposal":` + strings.Replace(proposal, "Initial", "Fresh", 1) + `}]`, []string{"$[0].proposal.state"}},
		{"proposal event without proposal", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"ProposalEvent","eventDate":"2026-11-22T10:00:00Z"}]`, []string{`"proposal" is missing`}},
		{"rejected event", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"ProposalRejectedEvent","eventDate":"2026-11-22T10:00:00Z","proposalId":"p","reason":{"message":"no"}}]`, nil},
		{"unknown event type", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"WeirdEvent","eventDate":"2026-11-22T10:00:00Z"}]`, []string{`"WeirdEvent" names no schema`}},
		{"event with stray member", "GET", "/market-api/v1/demands/s/events", 200, `[{"eventType":"ProposalRejectedEvent","eventDate":"2026-11-22T10:00:00Z","proposalId":"p","proposal":{}}]`, []string{"$[0].proposal: member not declared"}},
		{"empty events", "GET", "/market-api/v1/demands/s/events", 200, `[]`, nil},
		{"agreement", "GET", "/market-api/v1/agreements/a", 200, `{"agreementId":"a","demand":` + demand + `,"offer":` + offer + `,"validTo":"2026-11-22T11:00:00Z","state":"Approved","timestamp":"2026-11-22T10:00:00Z","approvedDate":"2026-11-22T10:00:01Z"}`, nil},
		{"agreement missing offer provider", "GET", "/market-api/v1/agreements/a", 200, `{"agreementId":"a","demand":` + demand + `,"offer":` + strings.Replace(offer, `"providerId":"0xp",`, "", 1) + `,"validTo":"2026-11-22T11:00:00Z","state":"Approved","timestamp":"2026-11-22T10:00:00Z"}`, []string{`$.offer: required member "providerId"`}},
		{"confirm 204", "POST", "/market-api/v1/agreements/a/confirm", 204, ``, nil},
		{"confirm 204 with body", "POST", "/market-api/v1/agreements/a/confirm", 204, `{}`, []string{"declares none"}},
		{"wait 408", "POST", "/market-api/v1/agreements/a/wait?timeout=1", 408, `{"message":"timeout"}`, nil},
		{"activity object", "POST", "/activity-api/v1/activity", 200, `{"activityId":"x"}`, nil},
		{"activity string", "POST", "/activity-api/v1/activity", 200, `"x"`, nil},
		{"activity state", "GET", "/activity-api/v1/activity/x/state", 200, `{"state":["Ready",null]}`, nil},
		{"activity state bad", "GET", "/activity-api/v1/activity/x/state", 200, `{"state":["Running",null]}`, []string{"$.state[0]"}},
		{"batch results", "GET", "/activity-api/v1/activity/x/exec/b", 200, `[{"index":0,"eventDate":"2026-11-22T10:00:00Z","result":"Ok","stdout":"hi","isBatchFinished":true}]`, nil},
		{"batch results negative index", "GET", "/activity-api/v1/activity/x/exec/b", 200, `[{"index":-1,"eventDate":"2026-11-22T10:00:00Z","result":"Ok"}]`, []string{"below the minimum"}},
		{"batch results float index", "GET", "/activity-api/v1/activity/x/exec/b", 200, `[{"index":0.5,"eventDate":"2026-11-22T10:00:00Z","result":"Ok"}]`, []string{"number where integer"}},
		{"exec batch id", "POST", "/activity-api/v1/activity/x/exec", 200, `"batch"`, nil},
		{"destroy 200 null", "DELETE", "/activity-api/v1/activity/x", 200, `null`, nil}, // yagna answers web::Json(()) (errata)
		{"allocation", "POST", "/payment-api/v1/allocations", 201, `{"allocationId":"al","totalAmount":"1","spentAmount":"0","remainingAmount":"1","timestamp":"2026-11-22T10:00:00Z","paymentPlatform":"erc20-holesky-tglm","makeDeposit":false}`, nil},
		{"allocation missing readOnly in response", "POST", "/payment-api/v1/allocations", 201, `{"allocationId":"al","totalAmount":"1"}`, []string{`"spentAmount" is missing`, `"timestamp" is missing`}},
		{"decorations", "GET", "/payment-api/v1/demandDecorations?allocationIds=al", 200, `{"properties":[{"key":"golem.com.payment.platform.erc20-holesky-tglm.address","value":"0xr"}],"constraints":["(golem.com.payment.platform.erc20-holesky-tglm.address=*)"]}`, nil},
		{"debit note event", "GET", "/payment-api/v1/debitNoteEvents", 200, `[{"eventType":"DebitNoteReceivedEvent","eventDate":"2026-11-22T10:00:00Z","debitNoteId":"dn"}]`, nil},
		{"debit note event wrong id member", "GET", "/payment-api/v1/debitNoteEvents", 200, `[{"eventType":"DebitNoteReceivedEvent","eventDate":"2026-11-22T10:00:00Z","invoiceId":"dn"}]`, []string{`"debitNoteId" is missing`}},
		{"debit note", "GET", "/payment-api/v1/debitNotes/dn", 200, `{"debitNoteId":"dn","issuerId":"0xp","recipientId":"0xr","payeeAddr":"0xp","payerAddr":"0xr","paymentPlatform":"erc20-holesky-tglm","timestamp":"2026-11-22T10:00:00Z","agreementId":"a","activityId":"x","totalAmountDue":"0.01","status":"RECEIVED","paymentDueDate":"2026-11-22T10:10:00Z"}`, nil},
		{"debit note bad status", "GET", "/payment-api/v1/debitNotes/dn", 200, `{"debitNoteId":"dn","issuerId":"0xp","recipientId":"0xr","payeeAddr":"0xp","payerAddr":"0xr","paymentPlatform":"p","timestamp":"2026-11-22T10:00:00Z","agreementId":"a","activityId":"x","totalAmountDue":"0.01","status":"received"}`, []string{"$.status"}},
		{"accept 200", "POST", "/payment-api/v1/debitNotes/dn/accept", 200, ``, nil},
		{"network", "POST", "/net-api/v1/net", 200, `{"id":"n","ip":"192.168.0.0","mask":"255.255.255.0","gateway":"192.168.0.1"}`, nil},
		{"network 201", "POST", "/net-api/v1/net", 201, `{"id":"n","ip":"192.168.0.0","mask":"255.255.255.0","gateway":""}`, []string{"201 is not documented"}},
		{"network missing gateway", "POST", "/net-api/v1/net", 200, `{"id":"n","ip":"192.168.0.0","mask":"255.255.255.0"}`, []string{`"gateway" is missing`}},
		{"nodes", "GET", "/net-api/v1/net/n/nodes", 200, `[{"id":"0xp","ip":"192.168.0.2"}]`, nil},
		{"me", "GET", "/me", 200, `{"identity":"0xr","name":"r","role":"manager"}`, nil},
		{"tcp upgrade", "GET", "/net-api/v1/net/n/tcp/192.168.0.2/80", 101, ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertProblems(t, s.CheckResponse(tt.method, tt.target, tt.status, []byte(tt.body)), tt.want)
		})
	}
}

// TestCheckProblemResponse: yagna's RFC 7807 answers (application/problem+json)
// are held to RFC 7807, not to the ErrorMessage the spec declares; the
// status must still be one the operation documents.
func TestCheckProblemResponse(t *testing.T) {
	s := spec(t)
	const funds = `{"type":"/payment-api/v1/allocations/validation-error","detail":"Insufficient funds","requestedFunds":"5","availableFunds":"0"}`
	tests := []struct {
		name, ctype string
		status      int
		body        string
		want        []string
	}{
		{"problem", ProblemJSON, 400, funds, nil},
		{"problem with charset", ProblemJSON + "; charset=utf-8", 400, funds, nil},
		{"problem as application/json", "application/json", 400, funds, []string{"$.detail: member not declared"}},
		{"problem with a numeric detail", ProblemJSON, 400, `{"detail":5}`, []string{"$.detail"}},
		{"problem on an undocumented status", ProblemJSON, 409, funds, []string{"409 is not documented"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertProblems(t, s.CheckResponseOf("POST", "/payment-api/v1/allocations", tt.status, tt.ctype, []byte(tt.body)), tt.want)
		})
	}
	// yagna answers an amendment beyond the funds with a 400 the spec does not list.
	assertProblems(t, s.CheckResponseOf("PUT", "/payment-api/v1/allocations/a1", 400, ProblemJSON, []byte(funds)), nil)
	assertProblems(t, s.CheckResponseOf("PUT", "/payment-api/v1/allocations/a1", 400, "application/json", []byte(`{"message":"x"}`)), []string{"400 is not documented"})
}

func TestCheckerHandlerAndTransport(t *testing.T) {
	c, err := NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/me":
			_, _ = io.WriteString(w, `{"identity":"0xr","name":"r","role":"manager"}`)
		case "/net-api/v1/net":
			_, _ = io.WriteString(w, `[{"id":"n"}]`) // wrong: ip, mask, gateway missing
		}
	})))
	defer srv.Close()
	client := &http.Client{Transport: c.Transport(nil)}
	for _, p := range []string{"/me", "/net-api/v1/net", "/nowhere"} {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	errs := c.Errors()
	// each wrong exchange is seen twice: by the transport and by the handler
	var text []string
	for _, e := range errs {
		text = append(text, e.Error())
	}
	joined := strings.Join(text, "\n")
	if len(errs) != 4 || strings.Count(joined, `"gateway" is missing`) != 2 || strings.Count(joined, "no such path") != 2 {
		t.Fatalf("violations:\n%s", joined)
	}
	if c.Seen()["getIdentity"] != 2 || c.Seen()["getNetworks"] != 2 {
		t.Fatalf("seen = %v", c.Seen())
	}
}

// A client that goes away before the answer (a killed gcompose) sees none:
// a handler that stops on the request's context writes nothing, and the
// handler side must not report net/http's implicit 200 as an undocumented
// answer (waitForApproval documents 204 and 410, never 200).
func TestCheckerHandlerClientGone(t *testing.T) {
	c, err := NewChecker()
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequest("POST", "/market-api/v1/agreements/a/wait?timeout=5", nil).WithContext(ctx)
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), req)
	if errs := c.Errors(); len(errs) != 0 {
		t.Fatalf("a request whose client went away was checked as answered: %v", errs)
	}
	if c.Seen()["waitForApproval"] != 1 {
		t.Fatalf("seen = %v", c.Seen())
	}
}
