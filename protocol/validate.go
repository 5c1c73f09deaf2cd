package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/schemas"
)

// SchemaBase is the URL under which the protocol schemas are published; each
// file of schemas/protocol has the $id SchemaBase + its file name.
const SchemaBase = "https://gcompose.dev/schemas/protocol/"

// Message names: the schema file of each message is <name>.json.
const (
	MsgRequest       = "request"
	MsgInitResult    = "init-result"
	MsgStateResult   = "state-result"
	MsgServeRequest  = "serve-request"
	MsgServeResponse = "serve-response"
	MsgSweepResult   = "sweep-result"
	MsgCheckResult   = "check-result"
)

// Validator checks protocol messages against the embedded schemas and
// resource configs against adapters' config schemas. It is safe for
// concurrent use; build one with NewValidator and share it.
type Validator struct {
	messages map[string]*jsonschema.Schema
	printer  *message.Printer

	mu      sync.Mutex
	configs map[[sha256.Size]byte]*jsonschema.Schema // compiled config_schemas by content
}

// NewValidator compiles the embedded protocol schemas once.
func NewValidator() (*Validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	files, err := fs.Glob(schemas.FS, "protocol/*.json")
	if err != nil {
		return nil, fmt.Errorf("list protocol schemas: %w", err)
	}
	for _, f := range files {
		raw, err := schemas.FS.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read schema %s: %w", f, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("parse schema %s: %w", f, err)
		}
		if err := c.AddResource(SchemaBase+path.Base(f), doc); err != nil {
			return nil, fmt.Errorf("add schema %s: %w", f, err)
		}
	}
	v := &Validator{
		messages: map[string]*jsonschema.Schema{},
		printer:  message.NewPrinter(language.English),
		configs:  map[[sha256.Size]byte]*jsonschema.Schema{},
	}
	for _, name := range []string{MsgRequest, MsgInitResult, MsgStateResult, MsgServeRequest, MsgServeResponse, MsgSweepResult, MsgCheckResult} {
		s, err := c.Compile(SchemaBase + name + ".json")
		if err != nil {
			return nil, fmt.Errorf("compile schema %s.json: %w", name, err)
		}
		v.messages[name] = s
	}
	return v, nil
}

// ValidateRequest checks a request (the stdin of any call).
func (v *Validator) ValidateRequest(data []byte) error {
	return v.ValidateMessage(MsgRequest, data)
}

// ValidateInitResult checks an init answer, including that its config_schema
// compiles.
func (v *Validator) ValidateInitResult(data []byte) error {
	if err := v.ValidateMessage(MsgInitResult, data); err != nil {
		return err
	}
	var r struct {
		ConfigSchema json.RawMessage `json:"config_schema"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("init answer: %w", err)
	}
	if len(r.ConfigSchema) > 0 {
		if _, err := v.configSchema(r.ConfigSchema); err != nil {
			return fmt.Errorf("init answer: /config_schema: %w", err)
		}
	}
	return nil
}

// ValidateStateResult checks a state answer.
func (v *Validator) ValidateStateResult(data []byte) error {
	return v.ValidateMessage(MsgStateResult, data)
}

// ValidateSweepResult checks a sweep answer.
func (v *Validator) ValidateSweepResult(data []byte) error {
	return v.ValidateMessage(MsgSweepResult, data)
}

// ValidateCheckResult checks a check answer.
func (v *Validator) ValidateCheckResult(data []byte) error {
	return v.ValidateMessage(MsgCheckResult, data)
}

// ValidateMessage checks data against the schema of the named message (one
// of the Msg constants). data must hold exactly one JSON value.
func (v *Validator) ValidateMessage(name string, data []byte) error {
	s, ok := v.messages[name]
	if !ok {
		return fmt.Errorf("no schema for message %q", name)
	}
	doc, err := decodeOne(data)
	if err != nil {
		return fmt.Errorf("%s: %w", describe(name), err)
	}
	if err := s.Validate(doc); err != nil {
		return v.schemaError(describe(name), doc, err)
	}
	return nil
}

// ValidateConfig checks a resource config against an adapter's config_schema
// (draft 2020-12 unless the schema says otherwise with $schema). An empty
// schema accepts any object, as in Deployster. Compiled schemas are cached by
// content.
func (v *Validator) ValidateConfig(schema json.RawMessage, config any) error {
	raw, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	doc, err := decodeOne(raw)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if doc == nil {
		doc = map[string]any{} // no config is an empty one
	}
	if len(bytes.TrimSpace(schema)) == 0 {
		if _, ok := doc.(map[string]any); !ok {
			return &SchemaError{Subject: "config", Violations: []Violation{{Keyword: "type", Message: "want object"}}}
		}
		return nil
	}
	s, err := v.configSchema(schema)
	if err != nil {
		return fmt.Errorf("adapter's config_schema: %w", err)
	}
	if err := s.Validate(doc); err != nil {
		return v.schemaError("config", doc, err)
	}
	return nil
}

func (v *Validator) configSchema(schema json.RawMessage) (*jsonschema.Schema, error) {
	key := sha256.Sum256(schema)
	v.mu.Lock()
	defer v.mu.Unlock()
	if s, ok := v.configs[key]; ok {
		return s, nil
	}
	doc, err := decodeOne(schema)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	loc := fmt.Sprintf("https://gcompose.dev/config-schema/%x.json", key[:8])
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		var se *jsonschema.SchemaValidationError
		if errors.As(err, &se) {
			msg := se.Err.Error()
			var sch *SchemaError
			if errors.As(v.schemaError("schema", nil, se.Err), &sch) {
				msg = sch.violationText()
			}
			return nil, fmt.Errorf("not a valid JSON Schema: %s", msg)
		}
		return nil, err
	}
	v.configs[key] = s
	return s, nil
}

// noLoader refuses every external reference: an adapter's config_schema must
// be self-contained (no network, no files at validation time).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %s not allowed: a config_schema must be self-contained", url)
}

func describe(name string) string {
	switch name {
	case MsgRequest:
		return "request"
	case MsgInitResult:
		return "init answer"
	case MsgStateResult:
		return "state answer"
	case MsgServeRequest:
		return "serve request"
	case MsgServeResponse:
		return "serve response"
	case MsgSweepResult:
		return "sweep answer"
	case MsgCheckResult:
		return "check answer"
	}
	return name
}

// decodeOne parses exactly one JSON value (numbers kept exact), refusing
// empty input and trailing data.
func decodeOne(data []byte) (any, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("not JSON: empty")
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("not JSON: data after the first value (offset %d)", d.InputOffset())
	}
	return doc, nil
}

// Violation is one way a document breaks its schema.
type Violation struct {
	// Pointer is the JSON pointer of the offending value ("" = the document).
	Pointer string
	// Keyword is the schema keyword that failed (required, type, const, ...).
	Keyword string
	// Message says what is wrong in plain words.
	Message string
}

func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Message
}

// SchemaError is a document that does not match its schema.
type SchemaError struct {
	// Subject names the document: "state answer", "config", ...
	Subject    string
	Violations []Violation
}

func (e *SchemaError) Error() string {
	return e.Subject + " does not match its schema: " + e.violationText()
}

func (e *SchemaError) violationText() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// schemaError turns the library's error into violations; doc is the
// instance that was validated (nil when there is none at hand), used to place
// a propertyNames violation (see namedObject).
func (v *Validator) schemaError(subject string, doc any, err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", subject, err)
	}
	var out []Violation
	v.flatten(ve, doc, nil, &out)
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
	out = slices.Compact(out)
	if len(out) == 0 {
		out = []Violation{{Message: ve.Error()}}
	}
	return &SchemaError{Subject: subject, Violations: out}
}

// flatten turns the library's tree of errors into leaf violations. For a
// failed oneOf/anyOf it keeps only the branches that were meant (those that
// did not fail on a discriminating const, such as status: VALID), so a STALE
// answer missing its actions is not also told it lacks a state.
//
// at is the location of the nearest error above e whose location can be
// trusted (nil at the top).
func (v *Validator) flatten(e *jsonschema.ValidationError, doc any, at []string, out *[]Violation) {
	switch k := e.ErrorKind.(type) {
	case *kind.PropertyNames:
		// the library reports the name's failure at the object itself
		p := jsonpointer.Format(append(namedObject(doc, at, e.InstanceLocation, k.Property), k.Property))
		msg := fmt.Sprintf("property name %q not allowed", k.Property)
		if len(e.Causes) == 1 && len(e.Causes[0].Causes) == 0 {
			msg += ": " + v.words(e.Causes[0].ErrorKind)
		}
		*out = append(*out, Violation{Pointer: p, Keyword: "propertyNames", Message: msg})
		return
	case *kind.OneOf, *kind.AnyOf:
		if len(e.Causes) == 0 { // oneOf matched more than one
			*out = append(*out, v.violation(e))
			return
		}
		if req := requiredOnly(e.Causes); req != nil {
			*out = append(*out, Violation{Pointer: jsonpointer.Format(e.InstanceLocation), Keyword: "required",
				Message: "missing one of properties " + quoteJoin(req)})
			return
		}
		meant := make([]*jsonschema.ValidationError, 0, len(e.Causes))
		for _, c := range e.Causes {
			if !hasKind[*kind.Const](c) {
				meant = append(meant, c)
			}
		}
		if len(meant) == 0 {
			if p, want, ok := constUnion(e.Causes); ok {
				*out = append(*out, Violation{Pointer: p, Keyword: "const", Message: "must be one of " + strings.Join(want, ", ")})
				return
			}
			meant = e.Causes
			if len(meant) > 1 { // nothing to tell them apart: say so once
				*out = append(*out, Violation{Pointer: jsonpointer.Format(e.InstanceLocation), Keyword: keyword(k),
					Message: "matches none of the allowed shapes: " + v.leafSummary(meant, doc, e.InstanceLocation)})
				return
			}
		}
		for _, c := range meant {
			v.flatten(c, doc, e.InstanceLocation, out)
		}
		return
	}
	if len(e.Causes) == 0 {
		*out = append(*out, v.violation(e))
		return
	}
	for _, c := range e.Causes {
		v.flatten(c, doc, e.InstanceLocation, out)
	}
}

// namedObject is where the object holding a property name that failed
// propertyNames is. jsonschema v6.0.3 gives such an error the validator's own
// location slice, not a copy (validator.go, objValidate: `verr.InstanceLocation
// = vd.vloc`), and validating a later sibling overwrites its tokens: the
// length is right, the tokens may not be (seen: /actions/0 reported for
// /gcompose/planned, depending on map order). The nearest error above it
// holds a copy made in time, so the object is looked for under that one, in
// the document, at the reported depth, holding the name. When it cannot be
// told apart, the trusted ancestor is reported: less precise, never wrong.
func namedObject(doc any, at, reported []string, name string) []string {
	depth := len(reported)
	if doc == nil || len(at) > depth {
		return slices.Clone(at)
	}
	base, ok := jsonpointer.Lookup(doc, jsonpointer.Format(at))
	if !ok {
		return slices.Clone(at)
	}
	var found [][]string
	var walk func(v any, path []string)
	walk = func(v any, path []string) {
		if len(found) > 1 {
			return
		}
		if len(path) == depth {
			if m, ok := v.(map[string]any); ok {
				if _, has := m[name]; has {
					found = append(found, slices.Clone(path))
				}
			}
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, append(slices.Clip(path), k))
			}
		case []any:
			for i, c := range x {
				walk(c, append(slices.Clip(path), strconv.Itoa(i)))
			}
		}
	}
	walk(base, slices.Clone(at))
	if len(found) != 1 {
		return slices.Clone(at)
	}
	return found[0]
}

func (v *Validator) leafSummary(errs []*jsonschema.ValidationError, doc any, at []string) string {
	var all []Violation
	for _, e := range errs {
		var vs []Violation
		v.flatten(e, doc, at, &vs)
		all = append(all, vs...)
	}
	parts := make([]string, 0, len(all))
	for _, x := range all {
		parts = append(parts, x.String())
	}
	return strings.Join(slices.Compact(parts), " / ")
}

func (v *Validator) violation(e *jsonschema.ValidationError) Violation {
	return Violation{Pointer: jsonpointer.Format(e.InstanceLocation), Keyword: keyword(e.ErrorKind), Message: v.words(e.ErrorKind)}
}

// words says what a failed keyword means, in plain words, with JSON quoting.
func (v *Validator) words(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			return "missing property " + quoteJoin(k.Missing)
		}
		return "missing properties " + quoteJoin(k.Missing)
	case *kind.AdditionalProperties:
		if len(k.Properties) == 1 {
			return "property " + quoteJoin(k.Properties) + " not allowed"
		}
		return "properties " + quoteJoin(k.Properties) + " not allowed"
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonText(w)
		}
		return "must be one of " + strings.Join(want, ", ") + ", not " + jsonText(k.Got)
	case *kind.Type:
		return "got " + k.Got + ", want " + strings.Join(k.Want, " or ")
	case *kind.Pattern:
		return fmt.Sprintf("%q does not match the pattern %q", k.Got, k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items, has %d", k.Want, k.Got)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties, has %d", k.Want, k.Got)
	case *kind.FalseSchema:
		return "not allowed"
	case *kind.Minimum:
		return "must be at least " + k.Want.RatString()
	}
	return k.LocalizedString(v.printer)
}

func jsonText(x any) string {
	raw, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(raw)
}

// constUnion: every branch failed on a const at the same place (a
// discriminator such as status): report the allowed values once.
func constUnion(causes []*jsonschema.ValidationError) (ptr string, want []string, ok bool) {
	for i, c := range causes {
		var found *jsonschema.ValidationError
		var walk func(e *jsonschema.ValidationError)
		walk = func(e *jsonschema.ValidationError) {
			if _, isConst := e.ErrorKind.(*kind.Const); isConst && found == nil {
				found = e
			}
			for _, c := range e.Causes {
				walk(c)
			}
		}
		walk(c)
		if found == nil {
			return "", nil, false
		}
		p := jsonpointer.Format(found.InstanceLocation)
		if i > 0 && p != ptr {
			return "", nil, false
		}
		ptr = p
		want = append(want, jsonText(found.ErrorKind.(*kind.Const).Want))
	}
	return ptr, want, true
}

// requiredOnly returns the union of missing properties when every branch
// failed only because a property was missing (state_action's "at least one
// of image, entrypoint, args").
func requiredOnly(causes []*jsonschema.ValidationError) []string {
	var missing []string
	for _, c := range causes {
		leaf := c
		for len(leaf.Causes) == 1 {
			leaf = leaf.Causes[0]
		}
		r, ok := leaf.ErrorKind.(*kind.Required)
		if !ok || len(leaf.Causes) != 0 {
			return nil
		}
		missing = append(missing, r.Missing...)
	}
	return missing
}

func hasKind[K jsonschema.ErrorKind](e *jsonschema.ValidationError) bool {
	if _, ok := e.ErrorKind.(K); ok {
		return true
	}
	for _, c := range e.Causes {
		if hasKind[K](c) {
			return true
		}
	}
	return false
}

func keyword(k jsonschema.ErrorKind) string {
	p := k.KeywordPath()
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
