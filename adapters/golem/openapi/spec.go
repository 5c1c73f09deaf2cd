// Package openapi is test support: it loads yagna's OpenAPI files
// (golemfactory/ya-client specs/*.yaml, copied unmodified into
// testdata/specs and embedded) and checks HTTP requests and responses against
// the operation they address — so the yagna client's requests and the devnet's
// answers can be held to the same contract.
//
// # What is checked
//
// Requests ([Spec.CheckRequest]): the method and path match an operation (path
// templates; literal segments win over {params}, so /payments/status is not
// /payments/{paymentId}); path parameters and query parameters against their
// schemas (type, integer-ness, minimum/maximum, enum; arrays with style form /
// explode false are comma-split); required query parameters present; unknown
// query parameters; the JSON body against the requestBody schema; a required body
// present; a body where none is declared.
//
// Responses ([Spec.CheckResponse]): the status is documented for the operation
// (or "default"; 401 is accepted on every operation that requires the app key,
// as the security scheme implies); the JSON body against that response's schema;
// no body where none is declared.
//
// # Schema subset
//
// type (object, array, string, number, integer, boolean), nullable, enum,
// required, properties, additionalProperties (boolean or schema), items,
// minItems/maxItems, minimum/maximum, allOf, oneOf (exactly one branch), anyOf,
// format date-time (RFC 3339), readOnly/writeOnly (a readOnly member is not
// required in — and must not be sent in — a request; writeOnly likewise for
// responses), and discriminator with explicit mapping or the implicit one
// (eventType "ProposalEvent" selects the component schema ProposalEvent of the
// same file). $refs are
// resolved within a file and into common.yaml; members next to a $ref override
// the referenced ones (the market spec renames a shared parameter that way).
//
// Strictness: members an object schema does not declare (through its
// properties, allOf parts or selected oneOf/discriminator branch) are reported,
// unless additionalProperties allows them — OpenAPI would allow them, but an
// unknown member is almost always a misspelled field name.
//
// Limits: recursive schemas are rejected at load time (there are none in the
// yagna specs). Not checked: headers (Authorization), content types other than JSON, pattern,
// string lengths, uniqueItems, multipleOf, formats other than date-time.
package openapi

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strings"

	"github.com/gcompose/gcompose/internal/jsonpointer"
	"go.yaml.in/yaml/v3"
)

//go:embed testdata/specs/*.yaml
var embedded embed.FS

// Spec is a loaded set of OpenAPI files.
type Spec struct {
	ops []*Operation
	// files: file name -> resolved document (for discriminator lookups)
	schemas map[string]map[string]any
}

// Operation is one method of one path.
type Operation struct {
	ID       string // operationId
	File     string // e.g. market-api.yaml
	Method   string // upper case
	Template string // full path template with the server prefix
	segs     []string
	params   []param
	body     *bodySpec
	// responses: "200", "default", ... -> schema (nil when no content)
	responses map[string]*respSpec
	secured   bool
}

type param struct {
	name     string
	in       string
	required bool
	schema   map[string]any
	explode  bool
	style    string
}

type bodySpec struct {
	required bool
	schema   map[string]any // nil: any JSON
}

type respSpec struct {
	schema     map[string]any
	hasContent bool
}

// Default loads the embedded copies of the specs.
func Default() (*Spec, error) {
	sub, err := fs.Sub(embedded, "testdata/specs")
	if err != nil {
		return nil, fmt.Errorf("embedded specs: %w", err)
	}
	return Load(sub)
}

// Load reads every *.yaml file of fsys (the directory with common.yaml).
func Load(fsys fs.FS) (*Spec, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing specs: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("no *.yaml spec files")
	}
	raw := map[string]map[string]any{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", n, err)
		}
		var doc any
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("parsing %s: %w", n, err)
		}
		m, ok := normalize(doc).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a mapping", n)
		}
		raw[n] = m
	}
	errata(raw)
	r := &resolver{raw: raw}
	s := &Spec{schemas: map[string]map[string]any{}}
	for _, n := range names {
		doc := raw[n]
		// component schemas, resolved, for discriminators
		comps := map[string]any{}
		if c, ok := doc["components"].(map[string]any); ok {
			if sc, ok := c["schemas"].(map[string]any); ok {
				for name, v := range sc {
					rv, err := r.resolve(n, v, 0)
					if err != nil {
						return nil, fmt.Errorf("%s schema %s: %w", n, name, err)
					}
					comps[name] = rv
				}
			}
		}
		s.schemas[n] = comps
		ops, err := r.operations(n, doc)
		if err != nil {
			return nil, err
		}
		s.ops = append(s.ops, ops...)
	}
	sort.Slice(s.ops, func(i, j int) bool {
		if s.ops[i].Template != s.ops[j].Template {
			return s.ops[i].Template < s.ops[j].Template
		}
		return s.ops[i].Method < s.ops[j].Method
	})
	return s, nil
}

// errata fixes what the specs get wrong in a way no answer can meet, before
// anything is resolved. Each fix names what yagna does.
//
// market-api.yaml AgreementListEntry requires id, creationTs, approveTs and
// role, declares id, timestamp, approvedDate and role, and discriminates on an
// eventType it does not have; yagna answers {id, timestamp, approvedDate
// (null until approved), role} (ya-client-model model/src/market/agreement.rs
// AgreementListEntry at the pinned b4bf2aa, camelCase, no skip; built in
// core/market/src/market.rs list_agreements).
//
// activity-api.yaml: createActivity answers 200, not 201, and DestroyActivity
// 200 with the body null (core/activity/src/requestor/control.rs
// create_activity, destroy_activity: web::Json); getExecBatchResults answers
// 408 {"message":"Timeout"} when commandIndex is not reached in time
// (exe-unit/src/handlers/rpc.rs Handler<GetExecBatchResults>:
// RpcMessageError::Timeout, core/activity/src/error.rs Error::Timeout).
//
// market-api.yaml status codes that yagna does not answer
// (core/market/src/rest_api): counterProposalDemand and createAgreement
// answer 200, not 201 (requestor.rs counter_proposal, create_agreement:
// HttpResponse::Ok().json); cancelAgreement and terminateAgreement 200 with
// no body, not 204 (requestor.rs cancel_agreement, common.rs
// terminate_agreement: HttpResponse::Ok().finish()); waitForApproval answers
// 400 for an agreement not confirmed yet or terminated (error.rs
// WaitForApprovalError::NotConfirmed, Terminated), which the spec lacks.
//
// market-api.yaml declares getTerminateAgreementReason as POST
// /agreements/{agreementId}/terminate/reason; yagna serves it as GET
// (core/market/src/rest_api/common.rs get_agreement_terminate_reason,
// #[actix_web::get]), so a POST there gets no answer from yagna.
//
// net-api.yaml, against core/vpn/src/requestor.rs at yagna 49e8b48:
//   - addAddress, addNode, removeNode and removeNetwork declare a 200 without
//     a body; yagna answers the JSON literal null (Ok(web::Json(()))).
//   - 403 is answered with an empty body (ApiError::error_response:
//     VpnError::Forbidden → HttpResponse::Forbidden().finish()), and every
//     call on /net/{networkId}... can answer it and 404 (VpnSupervisor::owner:
//     403 for an id the identity does not own while it owns others, 404
//     {"message":"Network not found"} when it owns none), addAddress and addNode
//     included, which the spec leaves without.
//   - GET /net/{networkId}/tcp (getConnections) does not exist: vpn_web_scope
//     registers no such route, only the websocket /tcp/{ip}/{port}.
//
// common.yaml ErrorMessage.message is a string; yagna's ErrorMessage has
// message: Option<String> without skip_serializing_if (ya-client-model
// model/src/error_message.rs), so a None is sent as null: the payment API's
// response::not_found() answers 404 {"message":null} (core/payment/src/utils.rs).
//
// payment-api.yaml types DebitNote.usageCounterVector as an object; a
// provider sends an array of numbers, one per counter of the offer's
// golem.com.usage.vector (agent/provider/src/payments/payments.rs
// send_debit_note: json!(cost_info.usage), a Vec<f64>). Its Allocation lacks
// createdTs and updatedTs, which yagna answers in every allocation
// (ya-client-model model/src/payment/allocation.rs created_ts, updated_ts).
func errata(raw map[string]map[string]any) {
	if cc, ok := raw["common.yaml"]["components"].(map[string]any); ok {
		if cs, ok := cc["schemas"].(map[string]any); ok {
			if em, ok := cs["ErrorMessage"].(map[string]any); ok {
				if props, ok := em["properties"].(map[string]any); ok {
					props["message"] = map[string]any{"type": "string", "nullable": true}
				}
			}
		}
	}
	if pc, ok := raw["payment-api.yaml"]["components"].(map[string]any); ok {
		if ps, ok := pc["schemas"].(map[string]any); ok {
			if dn, ok := ps["DebitNote"].(map[string]any); ok {
				if props, ok := dn["properties"].(map[string]any); ok {
					if _, ok := props["usageCounterVector"]; ok {
						props["usageCounterVector"] = map[string]any{"type": "array", "items": map[string]any{"type": "number"}}
					}
				}
			}
			if al, ok := ps["Allocation"].(map[string]any); ok {
				if props, ok := al["properties"].(map[string]any); ok {
					props["createdTs"] = map[string]any{"type": "string", "format": "date-time"}
					props["updatedTs"] = map[string]any{"type": "string", "format": "date-time"}
				}
			}
		}
	}
	if paths, ok := raw["net-api.yaml"]["paths"].(map[string]any); ok {
		delete(paths, "/net/{networkId}/tcp")
		for tmpl, p := range paths {
			pm, ok := p.(map[string]any)
			if !ok || !strings.HasPrefix(tmpl, "/net/{networkId}") || strings.HasPrefix(tmpl, "/net/{networkId}/tcp/") {
				continue
			}
			for method, op := range pm {
				om, ok := op.(map[string]any)
				if !ok || method == "parameters" || method == "description" {
					continue
				}
				rs, ok := om["responses"].(map[string]any)
				if !ok {
					continue
				}
				if r200, ok := rs["200"].(map[string]any); ok && r200["content"] == nil && r200["$ref"] == nil {
					r200["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"nullable": true, "enum": []any{nil}}}}
				}
				rs["403"] = map[string]any{"description": "(403) Forbidden: the network is not the requestor's; no body."}
				if _, ok := rs["404"]; !ok {
					rs["404"] = map[string]any{"$ref": "common.yaml#/responses/NotFound"}
				}
			}
		}
	}
	if paths, ok := raw["market-api.yaml"]["paths"].(map[string]any); ok {
		if p, ok := paths["/agreements/{agreementId}/terminate/reason"].(map[string]any); ok {
			if op, ok := p["post"]; ok {
				p["get"] = op
				delete(p, "post")
			}
		}
	}
	comps, _ := raw["market-api.yaml"]["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	if e, ok := schemas["AgreementListEntry"].(map[string]any); ok {
		delete(e, "discriminator")
		e["required"] = []any{"id", "timestamp", "approvedDate", "role"}
		e["properties"] = map[string]any{
			"id":           map[string]any{"type": "string"},
			"timestamp":    map[string]any{"type": "string", "format": "date-time"},
			"approvedDate": map[string]any{"type": "string", "format": "date-time", "nullable": true},
			"role":         map[string]any{"type": "string"},
		}
	}
	moveResponse(raw, "activity-api.yaml", "/activity", "post", "201", "200")
	if rs := responsesOf(raw, "activity-api.yaml", "/activity/{activityId}/exec/{batchId}", "get"); rs != nil {
		rs["408"] = map[string]any{"$ref": "common.yaml#/responses/Timeout"}
	}
	if rs := responsesOf(raw, "activity-api.yaml", "/activity/{activityId}", "delete"); rs != nil {
		rs["200"] = map[string]any{"description": "Activity destroyed: the JSON literal null.",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"nullable": true, "enum": []any{nil}}}}}
	}
	moveResponse(raw, "market-api.yaml", "/demands/{subscriptionId}/proposals/{proposalId}", "post", "201", "200")
	moveResponse(raw, "market-api.yaml", "/agreements", "post", "201", "200")
	moveResponse(raw, "market-api.yaml", "/agreements/{agreementId}/cancel", "post", "204", "200")
	moveResponse(raw, "market-api.yaml", "/agreements/{agreementId}/terminate", "post", "204", "200")
	if rs := responsesOf(raw, "market-api.yaml", "/agreements/{agreementId}/wait", "post"); rs != nil {
		rs["400"] = map[string]any{"$ref": "common.yaml#/responses/BadRequest"}
	}
}

// responsesOf is the responses of an operation of a raw spec, or nil.
func responsesOf(raw map[string]map[string]any, file, path, method string) map[string]any {
	paths, _ := raw[file]["paths"].(map[string]any)
	p, _ := paths[path].(map[string]any)
	op, _ := p[method].(map[string]any)
	rs, _ := op["responses"].(map[string]any)
	return rs
}

// moveResponse declares an operation's response under status to instead of
// from.
func moveResponse(raw map[string]map[string]any, file, path, method, from, to string) {
	if rs := responsesOf(raw, file, path, method); rs != nil {
		if r, ok := rs[from]; ok {
			rs[to] = r
			delete(rs, from)
		}
	}
}

// Operations lists the loaded operations (sorted by path, method).
func (s *Spec) Operations() []*Operation { return append([]*Operation(nil), s.ops...) }

// normalize turns YAML's map[any]any (response codes are integers) into
// map[string]any recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		return x
	}
	return v
}

type resolver struct {
	raw map[string]map[string]any
}

// maxRefDepth bounds chains of $ref hops; a recursive schema (none in the
// yagna specs) is reported as an error rather than inlined forever.
const maxRefDepth = 32

// resolve returns v with every $ref replaced (deep copy). Recursion through
// discriminators does not happen because discriminators are looked up lazily.
func (r *resolver) resolve(file string, v any, depth int) (any, error) {
	if depth > maxRefDepth {
		return nil, errors.New("$ref chain too deep (a recursive schema?)")
	}
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			target, tfile, err := r.lookup(file, ref)
			if err != nil {
				return nil, err
			}
			rt, err := r.resolve(tfile, target, depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", ref, err)
			}
			m, ok := rt.(map[string]any)
			if !ok {
				return rt, nil
			}
			out := make(map[string]any, len(m)+len(x))
			for k, e := range m {
				out[k] = e
			}
			for k, e := range x {
				if k == "$ref" {
					continue
				}
				re, err := r.resolve(file, e, depth)
				if err != nil {
					return nil, err
				}
				out[k] = re
			}
			return out, nil
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			re, err := r.resolve(file, e, depth)
			if err != nil {
				return nil, err
			}
			out[k] = re
		}
		if _, ok := out["discriminator"]; ok {
			out["x-file"] = file
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			re, err := r.resolve(file, e, depth)
			if err != nil {
				return nil, err
			}
			out[i] = re
		}
		return out, nil
	}
	return v, nil
}

// lookup follows "file.yaml#/a/b" or "#/a/b".
func (r *resolver) lookup(file, ref string) (any, string, error) {
	f, frag, ok := strings.Cut(ref, "#")
	if !ok {
		return nil, "", fmt.Errorf("$ref %q: no fragment", ref)
	}
	if f == "" {
		f = file
	} else {
		f = path.Clean(f)
	}
	doc, ok := r.raw[f]
	if !ok {
		return nil, "", fmt.Errorf("$ref %q: file %s not loaded", ref, f)
	}
	var cur any = doc
	for _, p := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if p == "" {
			continue
		}
		p = jsonpointer.Unescape(p)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("$ref %q: %q is not inside a mapping", ref, p)
		}
		if cur, ok = m[p]; !ok {
			return nil, "", fmt.Errorf("$ref %q: %q not found", ref, p)
		}
	}
	return cur, f, nil
}

var methods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

func (r *resolver) operations(file string, doc map[string]any) ([]*Operation, error) {
	prefix := ""
	if servers, ok := doc["servers"].([]any); ok && len(servers) > 0 {
		if sv, ok := servers[0].(map[string]any); ok {
			prefix, _ = sv["url"].(string)
		}
	}
	prefix = strings.TrimRight(prefix, "/")
	_, globalSec := doc["security"]
	paths, _ := doc["paths"].(map[string]any)
	var ops []*Operation
	for p, item := range paths {
		ritem, err := r.resolve(file, item, 0)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", file, p, err)
		}
		pi, _ := ritem.(map[string]any)
		common := paramList(pi["parameters"])
		for _, m := range methods {
			od, ok := pi[m].(map[string]any)
			if !ok {
				continue
			}
			op := &Operation{
				File:      file,
				Method:    strings.ToUpper(m),
				Template:  prefix + p,
				responses: map[string]*respSpec{},
				secured:   globalSec,
			}
			if _, ok := od["security"]; ok {
				op.secured = true
			}
			op.ID, _ = od["operationId"].(string)
			op.segs = splitPath(op.Template)
			op.params = mergeParams(common, paramList(od["parameters"]))
			if rb, ok := od["requestBody"].(map[string]any); ok {
				bs := &bodySpec{}
				bs.required, _ = rb["required"].(bool)
				bs.schema = jsonSchema(rb["content"])
				op.body = bs
			}
			if rs, ok := od["responses"].(map[string]any); ok {
				for code, rv := range rs {
					rm, _ := rv.(map[string]any)
					spec := &respSpec{}
					if c, ok := rm["content"].(map[string]any); ok && len(c) > 0 {
						spec.hasContent = true
						spec.schema = jsonSchema(c)
					}
					op.responses[code] = spec
				}
			}
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// jsonSchema picks the application/json schema of a content map.
func jsonSchema(content any) map[string]any {
	c, _ := content.(map[string]any)
	for _, ct := range []string{"application/json", "*/*"} {
		if mt, ok := c[ct].(map[string]any); ok {
			s, _ := mt["schema"].(map[string]any)
			if s == nil {
				return map[string]any{}
			}
			return s
		}
	}
	return nil
}

func paramList(v any) []param {
	l, _ := v.([]any)
	var out []param
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		p := param{}
		p.name, _ = m["name"].(string)
		p.in, _ = m["in"].(string)
		p.required, _ = m["required"].(bool)
		p.schema, _ = m["schema"].(map[string]any)
		p.style, _ = m["style"].(string)
		p.explode = true
		if e, ok := m["explode"].(bool); ok {
			p.explode = e
		}
		out = append(out, p)
	}
	return out
}

// mergeParams lets operation parameters override path-item ones (same name and in).
func mergeParams(common, own []param) []param {
	out := append([]param(nil), own...)
	for _, c := range common {
		dup := false
		for _, o := range own {
			if o.name == c.name && o.in == c.in {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// Find returns the operation that method and path (no query) address and the
// path parameters' values (unescaped).
func (s *Spec) Find(method, urlPath string) (*Operation, map[string]string, error) {
	// keep empty segments ("/a//b", "/a/") so they do not match a template
	var segs []string
	if p := strings.TrimPrefix(urlPath, "/"); p != "" {
		segs = strings.Split(p, "/")
	}
	var best *Operation
	bestLit := -1
	var bestParams map[string]string
	pathKnown := false
	for _, op := range s.ops {
		if len(op.segs) != len(segs) {
			continue
		}
		lit := 0
		params := map[string]string{}
		ok := true
		for i, t := range op.segs {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
				if segs[i] == "" {
					ok = false
					break
				}
				v, err := url.PathUnescape(segs[i]) // "+" stays "+" in a path
				if err != nil {
					ok = false
					break
				}
				params[t[1:len(t)-1]] = v
				continue
			}
			if t != segs[i] {
				ok = false
				break
			}
			lit++
		}
		if !ok {
			continue
		}
		pathKnown = true
		if op.Method != strings.ToUpper(method) {
			continue
		}
		if lit > bestLit {
			best, bestLit, bestParams = op, lit, params
		}
	}
	if best == nil {
		if pathKnown {
			return nil, nil, fmt.Errorf("%s %s: method not in the spec for this path", method, urlPath)
		}
		return nil, nil, fmt.Errorf("%s %s: no such path in the spec", method, urlPath)
	}
	return best, bestParams, nil
}
