package devnet_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gcompose/gcompose/adapters/golem/devnet"
)

// wireDir holds the goldens of yagna's real answers (adapters/golem/yagna/testdata/wire/README.md).
const wireDir = "../yagna/testdata/wire"

type wireGolden struct {
	Endpoint string `json:"endpoint"`
	Case     string `json:"case"`
	Request  struct {
		Body json.RawMessage `json:"body"`
	} `json:"request"`
	Status      int               `json:"status"`
	ContentType *string           `json:"content_type"`
	Body        json.RawMessage   `json:"body"`
	Formats     map[string]string `json:"formats"`
	Optional    []string          `json:"optional"`
}

func readGolden(t *testing.T, name string) wireGolden {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(wireDir, name+".json"))
	if err != nil {
		t.Skipf("golden %s: %v (the corpus is committed on main)", name, err)
	}
	var g wireGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return g
}

// TestWireShapes sends the devnet the requests of the goldens it serves and checks that each answer has
// the golden's shape: status, content type (none for an empty body), the same members with the same
// JSON types, and the golden's formats (CIDR or bare address, times, amounts, node ids); ids and times
// may differ. The old devnet failed it on the VPN's CIDR forms, the 403, the null bodies and the
// allocation's createdTs/updatedTs.
func TestWireShapes(t *testing.T) {
	if _, err := os.Stat(wireDir); err != nil {
		t.Skipf("no goldens under %s (the corpus is committed on main)", wireDir)
	}
	e := start(t, devnet.Config{})
	send := func(method, path string, body json.RawMessage) (int, string, []byte) {
		var rd io.Reader
		if len(body) > 0 && string(body) != "null" {
			rd = strings.NewReader(string(body))
		}
		req, err := http.NewRequest(method, e.url+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+testKey)
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	check := func(name, path string) []byte {
		t.Helper()
		g := readGolden(t, name)
		method, _, _ := strings.Cut(g.Endpoint, " ")
		status, ctype, body := send(method, path, g.Request.Body)
		for _, p := range shapeProblems(g, status, ctype, body) {
			t.Errorf("%s (%s %s): %s", name, method, path, p)
		}
		return body
	}
	// Owning no network: 404.
	check("net/get-network-not-found", "/net-api/v1/net/0123456789abcdef0123456789abcdef")
	var n struct{ ID string }
	_ = json.Unmarshal(check("net/create-network-success", "/net-api/v1/net"), &n)
	if n.ID == "" {
		t.Fatal("no network created")
	}
	var bare struct{ ID string }
	_ = json.Unmarshal(check("net/create-network-bare-ip-mask", "/net-api/v1/net"), &bare)
	check("net/get-network-success", "/net-api/v1/net/"+n.ID)
	check("net/list-networks-success", "/net-api/v1/net")
	check("net/get-addresses-success", "/net-api/v1/net/"+n.ID+"/addresses")
	check("net/add-node-success", "/net-api/v1/net/"+n.ID+"/nodes")
	check("net/add-node-ip-taken", "/net-api/v1/net/"+n.ID+"/nodes")
	check("net/get-nodes-success", "/net-api/v1/net/"+n.ID+"/nodes")
	check("net/add-address-success", "/net-api/v1/net/"+n.ID+"/addresses")
	check("net/add-address-taken", "/net-api/v1/net/"+n.ID+"/addresses")
	check("net/add-address-cidr", "/net-api/v1/net/"+n.ID+"/addresses")
	check("net/add-address-outside", "/net-api/v1/net/"+n.ID+"/addresses")
	check("net/remove-node-success", "/net-api/v1/net/"+n.ID+"/nodes/0x7b3c1e0a5d9f2e4b6c8a1d3f5e7b9c0a2d4f6e8a")
	check("net/get-network-forbidden", "/net-api/v1/net/0123456789abcdef0123456789abcdef")
	check("net/delete-network-success", "/net-api/v1/net/"+n.ID)
	check("net/delete-network-success", "/net-api/v1/net/"+bare.ID)

	check("identity/me-success", "/me")
	var a struct{ AllocationID string }
	g := readGolden(t, "payment/allocation-create-success")
	req := map[string]any{}
	_ = json.Unmarshal(g.Request.Body, &req)
	req["paymentPlatform"] = funded // the devnet's funded account; the golden's is yagna's default
	req["timeout"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body, _ := json.Marshal(req)
	status, ctype, out := send(http.MethodPost, "/payment-api/v1/allocations", body)
	for _, p := range shapeProblems(g, status, ctype, out) {
		t.Errorf("payment/allocation-create-success: %s", p)
	}
	_ = json.Unmarshal(out, &a)
	check("payment/allocation-get-success", "/payment-api/v1/allocations/"+a.AllocationID)
	check("payment/allocation-list-success", "/payment-api/v1/allocations")
	if status, _, _ := send(http.MethodDelete, "/payment-api/v1/allocations/"+a.AllocationID, nil); status != http.StatusOK {
		t.Errorf("release: %d", status)
	}
	check("payment/allocation-get-not-found", "/payment-api/v1/allocations/"+a.AllocationID) // a released one
	// An agreement (no image needed: no activity is made).
	neg := e.rent(ctxT(t, time.Minute), taskPackage(testHash))
	check("market/agreement-get-success", "/market-api/v1/agreements/"+neg.agreement)
	check("market/agreements-list-success", "/market-api/v1/agreements")
	check("market/demands-list-success", "/market-api/v1/demands")
	check("payment/allocation-release-gone", "/payment-api/v1/allocations/"+a.AllocationID)
}

// shapeProblems compares an answer with a golden: status, content type, members and JSON types, formats.
func shapeProblems(g wireGolden, status int, ctype string, body []byte) []string {
	var out []string
	if status != g.Status {
		out = append(out, fmt.Sprintf("status %d, yagna answers %d", status, g.Status))
		return out
	}
	empty := len(strings.TrimSpace(string(body))) == 0
	if g.ContentType == nil {
		if !empty {
			out = append(out, fmt.Sprintf("body %q, yagna answers none", body))
		}
		return out
	}
	if !strings.HasPrefix(ctype, strings.Split(*g.ContentType, ";")[0]) {
		out = append(out, fmt.Sprintf("content type %q, yagna answers %q", ctype, *g.ContentType))
	}
	var want, have any
	if err := json.Unmarshal(g.Body, &want); err != nil {
		return append(out, "golden body: "+err.Error())
	}
	if err := json.Unmarshal(body, &have); err != nil {
		return append(out, fmt.Sprintf("body %q is not JSON: %v", body, err))
	}
	out = append(out, shapeDiff(want, have, "", g.Optional)...)
	for ptr, f := range g.Formats {
		for _, v := range lookupAll(have, strings.Split(strings.TrimPrefix(ptr, "/"), "/")) {
			if msg := formatProblem(f, v); msg != "" {
				out = append(out, fmt.Sprintf("%s: %s", ptr, msg))
			}
		}
	}
	sort.Strings(out)
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists members present on one side only (optional ones aside) and JSON types that differ; arrays
// are compared by their first elements.
func shapeDiff(want, have any, at string, optional []string) []string {
	opt := func(p string) bool {
		for _, o := range optional {
			if o == p || regexp.MustCompile("^"+strings.ReplaceAll(regexp.QuoteMeta(o), `\*`, `[^/]+`)+"$").MatchString(p) {
				return true
			}
		}
		return false
	}
	if jsonType(want) != jsonType(have) {
		if want == nil && opt(at) {
			return nil
		}
		return []string{fmt.Sprintf("%s: %s, yagna answers %s", orRoot(at), jsonType(have), jsonType(want))}
	}
	var out []string
	switch w := want.(type) {
	case map[string]any:
		h := have.(map[string]any)
		if strings.HasSuffix(at, "/properties") {
			return nil // free-form: the devnet's offers and demands are its own
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok {
				if !opt(at + "/" + k) {
					out = append(out, fmt.Sprintf("%s/%s: missing", at, k))
				}
				continue
			}
			out = append(out, shapeDiff(wv, hv, at+"/"+k, optional)...)
		}
		for k := range h {
			if _, ok := w[k]; !ok && !opt(at+"/"+k) {
				out = append(out, fmt.Sprintf("%s/%s: yagna has no such member", at, k))
			}
		}
	case []any:
		h := have.([]any)
		if len(w) > 0 && len(h) > 0 {
			out = append(out, shapeDiff(w[0], h[0], at+"/0", optional)...)
		}
	}
	return out
}

func orRoot(at string) string {
	if at == "" {
		return "the body"
	}
	return at
}

// lookupAll follows a golden's format pointer ("*" for every element or member).
func lookupAll(v any, parts []string) []any {
	if len(parts) == 0 || (len(parts) == 1 && parts[0] == "") {
		return []any{v}
	}
	p, rest := parts[0], parts[1:]
	switch x := v.(type) {
	case map[string]any:
		if p == "*" {
			var out []any
			for _, e := range x {
				out = append(out, lookupAll(e, rest)...)
			}
			return out
		}
		if e, ok := x[p]; ok {
			return lookupAll(e, rest)
		}
	case []any:
		if p == "*" {
			var out []any
			for _, e := range x {
				out = append(out, lookupAll(e, rest)...)
			}
			return out
		}
		var i int
		if _, err := fmt.Sscan(p, &i); err == nil && i < len(x) {
			return lookupAll(x[i], rest)
		}
	}
	return nil
}

var (
	nodeIDRe  = regexp.MustCompile(`^0x[0-9a-f]{40}$`)
	decimalRe = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	// chrono writes 0, 3, 6 or 9 fraction digits; Go's encoding trims trailing zeros, so the devnet's
	// times may have any number: the client reads both.
	rfc3339Re = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$`)
)

// formatProblem checks a value against a golden format; ids (uuid, hex32, hex64, proposal-id) are only
// strings here: the devnet's ids are its own.
func formatProblem(f string, v any) string {
	s, isStr := v.(string)
	switch {
	case f == "cidr":
		if _, err := netip.ParsePrefix(s); !isStr || err != nil {
			return fmt.Sprintf("%v is not CIDR", v)
		}
	case f == "ipv4":
		if a, err := netip.ParseAddr(s); !isStr || err != nil || !a.Is4() {
			return fmt.Sprintf("%v is not a bare IPv4 address", v)
		}
	case f == "node-id":
		if !isStr || !nodeIDRe.MatchString(s) {
			return fmt.Sprintf("%v is not a node id", v)
		}
	case f == "decimal-string":
		if !isStr || !decimalRe.MatchString(s) {
			return fmt.Sprintf("%v is not a decimal string", v)
		}
	case f == "rfc3339":
		if !isStr || !rfc3339Re.MatchString(s) {
			return fmt.Sprintf("%v is not an RFC 3339 UTC time ending in Z", v)
		}
	case f == "string", f == "uuid", f == "hex32", f == "hex64", f == "proposal-id":
		if !isStr {
			return fmt.Sprintf("%v is not a string", v)
		}
	case f == "number", f == "integer":
		if _, ok := v.(float64); !ok {
			return fmt.Sprintf("%v is not a number", v)
		}
	case f == "bool":
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%v is not a bool", v)
		}
	case strings.HasPrefix(f, "enum:"):
		if !isStr || !strings.Contains("|"+strings.TrimPrefix(f, "enum:")+"|", "|"+s+"|") {
			return fmt.Sprintf("%v is not one of %s", v, strings.TrimPrefix(f, "enum:"))
		}
	}
	return ""
}
