package openapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gcompose/gcompose/internal/jsonvalue"
)

// direction tells readOnly/writeOnly rules which side is checked.
type direction int

const (
	inRequest direction = iota
	inResponse
)

// validator checks one JSON value against a resolved schema.
type validator struct {
	spec *Spec
	dir  direction
	errs []string
}

func (v *validator) addf(at, format string, args ...any) {
	v.errs = append(v.errs, at+": "+fmt.Sprintf(format, args...))
}

// decodeJSON decodes with json.Number so integers can be told from floats.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return x, nil
}

func typeName(x any) string {
	switch n := x.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case json.Number:
		if isInteger(n) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}

func isInteger(n json.Number) bool {
	if _, err := n.Int64(); err == nil {
		return true
	}
	f, err := n.Float64()
	return err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
}

// check validates x against schema s at path at. dispatched says that a
// discriminator already chose s for this very value (no second dispatch).
// It returns the object member names the schema (and its parts) declare, for
// the unknown-member check of the caller that owns the object.
func (v *validator) check(x any, s map[string]any, at string, dispatched bool) map[string]bool {
	if s == nil {
		return nil
	}
	known := map[string]bool{}
	if x == nil {
		if n, _ := s["nullable"].(bool); n {
			return known
		}
		if _, typed := s["type"]; typed {
			v.addf(at, "null where %v is expected", s["type"])
			return known
		}
	}

	// discriminator: select the schema named by the property's value
	if d, ok := s["discriminator"].(map[string]any); ok && !dispatched {
		if obj, ok := x.(map[string]any); ok {
			prop, _ := d["propertyName"].(string)
			if val, ok := obj[prop].(string); ok {
				file, _ := s["x-file"].(string)
				target := v.discriminated(file, d, val)
				if target == nil {
					v.addf(at, "%s %q names no schema of %s", prop, val, file)
				} else {
					return v.check(x, target, at, true)
				}
			}
		}
	}

	t, ok := s["type"].(string)
	if !ok && impliesObject(s) {
		// {properties: ...} without a type: the specs mean an object (their
		// PaymentPlatform would otherwise accept any string in a oneOf)
		t, ok = "object", true
	}
	if ok && x != nil {
		got := typeName(x)
		okType := got == t || (t == "number" && got == "integer")
		if !okType {
			v.addf(at, "%s where %s is expected", got, t)
			return known
		}
	}

	if e, ok := s["enum"].([]any); ok && x != nil {
		found := false
		for _, want := range e {
			if fmt.Sprint(want) == fmt.Sprint(x) {
				found = true
				break
			}
		}
		if !found {
			v.addf(at, "%v is not one of %v", x, e)
		}
	}

	switch val := x.(type) {
	case string:
		if f, _ := s["format"].(string); f == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, val); err != nil {
				v.addf(at, "%q is not an RFC 3339 date-time", val)
			}
		}
	case json.Number:
		f, _ := val.Float64()
		if m, ok := jsonvalue.Number(s["minimum"]); ok && f < m {
			v.addf(at, "%v is below the minimum %v", val, m)
		}
		if m, ok := jsonvalue.Number(s["maximum"]); ok && f > m {
			v.addf(at, "%v is above the maximum %v", val, m)
		}
	case []any:
		if m, ok := jsonvalue.Number(s["minItems"]); ok && float64(len(val)) < m {
			v.addf(at, "%d items, at least %v wanted", len(val), m)
		}
		if m, ok := jsonvalue.Number(s["maxItems"]); ok && float64(len(val)) > m {
			v.addf(at, "%d items, at most %v wanted", len(val), m)
		}
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range val {
				v.checkOwned(e, items, fmt.Sprintf("%s[%d]", at, i))
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name := range props {
			known[name] = true
		}
		required, _ := s["required"].([]any)
		for _, r := range required {
			name, _ := r.(string)
			ps, _ := props[name].(map[string]any)
			if v.dir == inRequest && boolOf(ps, "readOnly") || v.dir == inResponse && boolOf(ps, "writeOnly") {
				continue
			}
			if _, ok := val[name]; !ok {
				v.addf(at, "required member %q is missing", name)
			}
		}
		for name, e := range val {
			ps, ok := props[name].(map[string]any)
			if !ok {
				continue
			}
			if v.dir == inRequest && boolOf(ps, "readOnly") {
				v.addf(at+"."+name, "readOnly member sent in a request")
			}
			if v.dir == inResponse && boolOf(ps, "writeOnly") {
				v.addf(at+"."+name, "writeOnly member sent in a response")
			}
			v.checkOwned(e, ps, at+"."+name)
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap {
				known["*"] = true
			}
		case map[string]any:
			known["*"] = true
			for name, e := range val {
				if _, declared := props[name]; !declared {
					v.checkOwned(e, ap, at+"."+name)
				}
			}
		}
	}

	if all, ok := s["allOf"].([]any); ok {
		for _, part := range all {
			ps, _ := part.(map[string]any)
			for k := range v.check(x, ps, at, dispatched) {
				known[k] = true
			}
		}
	}
	if one, ok := s["oneOf"].([]any); ok {
		matched := 0
		var matchedKnown map[string]bool
		var firstErrs []string
		for _, part := range one {
			ps, _ := part.(map[string]any)
			sub := &validator{spec: v.spec, dir: v.dir}
			k := sub.checkOwned(x, ps, at)
			if len(sub.errs) == 0 {
				matched++
				matchedKnown = k
			} else if firstErrs == nil {
				firstErrs = sub.errs
			}
		}
		switch {
		case matched == 0:
			v.addf(at, "matches none of oneOf (first branch: %s)", strings.Join(firstErrs, "; "))
		case matched > 1:
			v.addf(at, "matches %d branches of oneOf, want exactly one", matched)
		}
		for k := range matchedKnown {
			known[k] = true
		}
		known["*"] = true // the branch did its own unknown-member check
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		matched := false
		for _, part := range anyOf {
			ps, _ := part.(map[string]any)
			sub := &validator{spec: v.spec, dir: v.dir}
			sub.checkOwned(x, ps, at)
			if len(sub.errs) == 0 {
				matched = true
				break
			}
		}
		if !matched {
			v.addf(at, "matches none of anyOf")
		}
		known["*"] = true
	}
	return known
}

// checkOwned checks x against s and, x being an object that s owns, reports
// members that nothing in s declares.
func (v *validator) checkOwned(x any, s map[string]any, at string) map[string]bool {
	known := v.check(x, s, at, false)
	obj, ok := x.(map[string]any)
	if !ok || known["*"] || !declaresObject(s) {
		return known
	}
	var unknown []string
	for name := range obj {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		v.addf(at+"."+name, "member not declared by the schema")
	}
	return known
}

func impliesObject(s map[string]any) bool {
	for _, k := range []string{"properties", "required", "additionalProperties"} {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// declaresObject: the schema (or its allOf parts) lists properties, so unknown
// members are meaningful; a bare {type: object} is free-form.
func declaresObject(s map[string]any) bool {
	if _, ok := s["properties"]; ok {
		return true
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, p := range all {
			if ps, ok := p.(map[string]any); ok && declaresObject(ps) {
				return true
			}
		}
	}
	if _, ok := s["discriminator"]; ok {
		return true
	}
	return false
}

func (v *validator) discriminated(file string, d map[string]any, val string) map[string]any {
	if mapping, ok := d["mapping"].(map[string]any); ok {
		if ref, ok := mapping[val].(string); ok {
			if i := strings.LastIndex(ref, "/"); i >= 0 {
				val = ref[i+1:]
			}
		}
	}
	m, _ := v.spec.schemas[file][val].(map[string]any)
	return m
}

func boolOf(m map[string]any, k string) bool {
	b, _ := m[k].(bool)
	return b
}

// checkParam validates a path or query parameter's raw string value.
func (v *validator) checkParam(p param, raw string) {
	at := p.in + " parameter " + p.name
	s := p.schema
	if s == nil {
		return
	}
	if t, _ := s["type"].(string); t == "array" {
		var parts []string
		if raw != "" {
			parts = strings.Split(raw, ",")
		}
		items, _ := s["items"].(map[string]any)
		for i, part := range parts {
			v.checkScalar(fmt.Sprintf("%s[%d]", at, i), items, part)
		}
		return
	}
	v.checkScalar(at, s, raw)
}

func (v *validator) checkScalar(at string, s map[string]any, raw string) {
	t, _ := s["type"].(string)
	format, _ := s["format"].(string)
	var x any = raw
	switch t {
	case "integer":
		if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
			v.addf(at, "%q is not an integer", raw)
			return
		}
		x = json.Number(raw)
	case "number":
		if _, err := strconv.ParseFloat(raw, 64); err != nil {
			v.addf(at, "%q is not a number", raw)
			return
		}
		if format == "integer" {
			if _, err := strconv.ParseInt(raw, 10, 64); err != nil {
				v.addf(at, "%q is not an integer", raw)
				return
			}
		}
		x = json.Number(raw)
	case "boolean":
		if raw != "true" && raw != "false" {
			v.addf(at, "%q is not a boolean", raw)
			return
		}
		x = raw == "true"
	}
	v.check(x, s, at, false)
}
