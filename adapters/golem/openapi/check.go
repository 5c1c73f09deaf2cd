package openapi

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Violations lists what an exchange got wrong; it is the error CheckRequest and
// CheckResponse return.
type Violations struct {
	Method, Target string // as checked
	Operation      string // operationId ("" if none matched)
	Side           string // "request" or "response"
	Problems       []string
}

func (v *Violations) Error() string {
	op := ""
	if v.Operation != "" {
		op = " (" + v.Operation + ")"
	}
	return fmt.Sprintf("%s %s%s %s: %s", v.Method, v.Target, op, v.Side, strings.Join(v.Problems, "; "))
}

// CheckRequest checks a request: target is the request URI (path and optional
// query, as r.URL.RequestURI()), body the raw body (nil or empty for none).
func (s *Spec) CheckRequest(method, target string, body []byte) error {
	op, pathParams, query, err := s.locate(method, target)
	if err != nil {
		return &Violations{Method: method, Target: target, Side: "request", Problems: []string{err.Error()}}
	}
	v := &validator{spec: s, dir: inRequest}
	for _, p := range op.params {
		switch p.in {
		case "path":
			val, ok := pathParams[p.name]
			if !ok {
				v.addf("path", "parameter %s is not in the template %s", p.name, op.Template)
				continue
			}
			v.checkParam(p, val)
		case "query":
			vals, ok := query[p.name]
			if !ok {
				if p.required {
					v.addf("query", "required parameter %q is missing", p.name)
				}
				continue
			}
			if len(vals) > 1 && !(p.explode && isArray(p.schema)) {
				v.addf("query", "parameter %q given %d times", p.name, len(vals))
			}
			for _, val := range vals {
				v.checkParam(p, val)
			}
		}
	}
	var unknown []string
	for name := range query {
		if !hasParam(op, "query", name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		v.addf("query", "parameter %q is not declared", name)
	}
	v.checkBody(op.body, body)
	return v.result(method, target, op, "request")
}

func (v *validator) checkBody(spec *bodySpec, body []byte) {
	empty := len(bytes.TrimSpace(body)) == 0
	switch {
	case spec == nil && !empty:
		v.addf("body", "a body where the operation declares none")
	case spec == nil:
	case empty && spec.required:
		v.addf("body", "required body is missing")
	case empty:
	case spec.schema == nil:
		v.addf("body", "the operation declares no JSON body")
	default:
		x, err := decodeJSON(body)
		if err != nil {
			v.addf("body", "not JSON: %v", err)
			return
		}
		v.checkOwned(x, spec.schema, "$")
	}
}

// ProblemJSON is the media type of RFC 7807 problem details.
const ProblemJSON = "application/problem+json"

// CheckResponse checks the answer to a request: status and raw body.
func (s *Spec) CheckResponse(method, target string, status int, body []byte) error {
	return s.CheckResponseOf(method, target, status, "application/json", body)
}

// CheckResponseOf is CheckResponse knowing the answer's Content-Type. yagna
// answers some errors as RFC 7807 problem details (application/problem+json:
// allocation validation, core/payment/src/api/allocations/api_error.rs), a
// media type ya-client's specs do not describe (they declare ErrorMessage);
// such an answer to a documented error status is held to RFC 7807 instead.
func (s *Spec) CheckResponseOf(method, target string, status int, contentType string, body []byte) error {
	if mt, _, _ := strings.Cut(contentType, ";"); strings.TrimSpace(mt) == ProblemJSON && status >= 400 {
		op, _, _, err := s.locate(method, target)
		if err != nil {
			return &Violations{Method: method, Target: target, Side: "response", Problems: []string{err.Error()}}
		}
		v := &validator{spec: s, dir: inResponse}
		if _, ok := op.responses[strconv.Itoa(status)]; !ok && !slices.Contains(undocumentedProblems[op.ID], status) {
			v.addf("status", "%d is not documented (documented: %s)", status, strings.Join(codes(op), ", "))
		} else if x, err := decodeJSON(body); err != nil {
			v.addf("body", "not JSON: %v", err)
		} else {
			v.checkOwned(x, problemSchema, "$")
		}
		return v.result(method, target, op, "response")
	}
	return s.checkResponse(method, target, status, body)
}

// undocumentedProblems are the statuses yagna answers with an RFC 7807 body
// that the spec does not list for the operation: amending an allocation
// beyond the account's funds or below what is spent is a 400
// (core/payment/src/api/allocations/mod.rs amend_allocation:
// response::bad_request, api_error::try_from_validation), while the spec
// documents 200, 401, 404 and 500 only.
var undocumentedProblems = map[string][]int{"amendAllocation": {400}}

// problemSchema is RFC 7807's problem details object: extension members are
// allowed.
var problemSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"type": map[string]any{"type": "string"}, "title": map[string]any{"type": "string"},
		"status": map[string]any{"type": "integer"}, "detail": map[string]any{"type": "string"},
		"instance": map[string]any{"type": "string"},
	},
	"additionalProperties": true,
}

func (s *Spec) checkResponse(method, target string, status int, body []byte) error {
	op, _, _, err := s.locate(method, target)
	if err != nil {
		return &Violations{Method: method, Target: target, Side: "response", Problems: []string{err.Error()}}
	}
	v := &validator{spec: s, dir: inResponse}
	rs, ok := op.responses[strconv.Itoa(status)]
	if status == 401 && op.secured {
		// yagna's auth middleware answers 401 before any handler, as text/plain "Missing application key"
		// or "Invalid application key" (core/serv-api/web/src/middleware/auth/mod.rs: actix
		// ErrorUnauthorized), whatever the operation declares: a body, not an ErrorMessage.
		rs, ok = &respSpec{hasContent: true}, true
	}
	if !ok {
		if status == 401 && op.secured {
			rs, ok = op.responses["default"]
			if !ok {
				rs, ok = &respSpec{hasContent: true, schema: errorMessageSchema}, true
			}
		} else if rs, ok = op.responses["default"]; ok && status >= 200 && status < 300 {
			// a success outside the documented ones: default is for errors
			ok = false
		}
	}
	if !ok {
		v.addf("status", "%d is not documented (documented: %s)", status, strings.Join(codes(op), ", "))
		return v.result(method, target, op, "response")
	}
	empty := len(bytes.TrimSpace(body)) == 0
	switch {
	case !rs.hasContent && !empty:
		v.addf("body", "a body where status %d declares none", status)
	case rs.hasContent && empty:
		v.addf("body", "no body where status %d declares one", status)
	case rs.hasContent && rs.schema != nil:
		x, err := decodeJSON(body)
		if err != nil {
			v.addf("body", "not JSON: %v", err)
			break
		}
		v.checkOwned(x, rs.schema, "$")
	}
	return v.result(method, target, op, "response")
}

var errorMessageSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"message": map[string]any{"type": "string"}},
}

func (v *validator) result(method, target string, op *Operation, side string) error {
	if len(v.errs) == 0 {
		return nil
	}
	return &Violations{Method: method, Target: target, Operation: op.ID, Side: side, Problems: v.errs}
}

func (s *Spec) locate(method, target string) (*Operation, map[string]string, url.Values, error) {
	p, rawQuery, _ := strings.Cut(target, "?")
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		p, rawQuery = u.EscapedPath(), u.RawQuery
	}
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("query %q: %w", rawQuery, err)
	}
	op, params, err := s.Find(method, p)
	if err != nil {
		return nil, nil, nil, err
	}
	return op, params, query, nil
}

func hasParam(op *Operation, in, name string) bool {
	for _, p := range op.params {
		if p.in == in && p.name == name {
			return true
		}
	}
	return false
}

func isArray(s map[string]any) bool {
	t, _ := s["type"].(string)
	return t == "array"
}

func codes(op *Operation) []string {
	var out []string
	for c := range op.responses {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// CheckSchema checks raw JSON against the component schema name of file (e.g.
// "activity-api.yaml", "RunCommand"); request selects the readOnly/writeOnly
// rules of a request body, else of a response.
func (s *Spec) CheckSchema(file, name string, raw []byte, request bool) error {
	sc, ok := s.schemas[file][name].(map[string]any)
	if !ok {
		return fmt.Errorf("no schema %s in %s", name, file)
	}
	dir := inResponse
	if request {
		dir = inRequest
	}
	v := &validator{spec: s, dir: dir}
	x, err := decodeJSON(raw)
	if err != nil {
		v.addf("$", "not JSON: %v", err)
	} else {
		v.checkOwned(x, sc, "$")
	}
	if len(v.errs) == 0 {
		return nil
	}
	return &Violations{Method: "-", Target: file + "#/components/schemas/" + name, Side: "value", Problems: v.errs}
}
