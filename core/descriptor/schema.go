package descriptor

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/gcompose/gcompose/core/source"
	"github.com/gcompose/gcompose/internal/jsonpointer"
	"github.com/gcompose/gcompose/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	jskind "github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// SchemaFile is the descriptor schema's name in package schemas.
const SchemaFile = "gaom.schema.json"

// SchemaURL is the descriptor schema's $id.
const SchemaURL = "https://gcompose.dev/schemas/gaom.schema.json"

// schemaValidator validates trees against the embedded descriptor schema
// and turns its errors into diagnostics at the offending keys and values.
type schemaValidator struct {
	schema  *jsonschema.Schema
	doc     any // the schema itself, to list the keys a mapping allows
	printer *message.Printer
}

func newSchemaValidator() (*schemaValidator, error) {
	data, err := schemas.FS.ReadFile(SchemaFile)
	if err != nil {
		return nil, fmt.Errorf("reading embedded %s: %w", SchemaFile, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("parsing embedded %s: %w", SchemaFile, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, fmt.Errorf("adding %s: %w", SchemaFile, err)
	}
	sch, err := c.Compile(SchemaURL)
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", SchemaFile, err)
	}
	return &schemaValidator{schema: sch, doc: doc, printer: message.NewPrinter(language.English)}, nil
}

// problem is one schema violation at an instance location.
type problem struct {
	loc     []string
	unknown string   // set for an unknown key
	known   []string // keys allowed where the unknown one stands
	msg     string
	// ofValue: msg follows the value ("-1 is not ..."), from ownMessage.
	ofValue bool
}

// budgetAmountMessage says what budget.per_hour and budget.total accept,
// after the value that is not that.
const budgetAmountMessage = `is not an amount above 0 (in the adapters' currency): write a number such as 2 or 0.5, or a decimal string such as "0.5"; leave the key out for no limit`

// ownMessage is what a value that breaks the schema at schemaURL is told,
// when that schema is better said as a whole than keyword by keyword: a
// budget amount of -1 breaks a minimum and "abc" a pattern whose regex
// means little to most, where both want the same thing.
func ownMessage(schemaURL string) string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	switch frag {
	case "/$defs/budgetAmount":
		return budgetAmountMessage
	}
	return ""
}

// check validates tree and reports every violation. With ignoreUnknown,
// unknown keys become warnings and are removed from the tree.
func (sv *schemaValidator) check(tree *value, ignoreUnknown bool) source.Diagnostics {
	var diags source.Diagnostics
	probs := sv.validate(tree)
	if ignoreUnknown {
		doomed := map[*value]map[string]bool{}
		for _, p := range probs {
			if p.unknown == "" {
				continue
			}
			v := tree.lookup(p.loc)
			parent := tree.lookup(p.loc[:len(p.loc)-1])
			if v == nil || parent == nil {
				continue
			}
			diags.Warnf(v.keyPos, "ignored unknown key %q%s", p.unknown, unknownHint(p))
			if doomed[parent] == nil {
				doomed[parent] = map[string]bool{}
			}
			doomed[parent][p.unknown] = true
		}
		for parent, keys := range doomed {
			parent.delAll(keys)
		}
		if len(doomed) > 0 {
			probs = sv.validate(tree)
		}
	}
	for _, p := range probs {
		v := tree.lookup(p.loc)
		var at source.Pos
		if v != nil {
			at = v.at()
		}
		if p.unknown != "" {
			if v != nil {
				at = v.keyPos
			}
			diags.Errorf(at, "unknown key %q%s", p.unknown, unknownHint(p))
			continue
		}
		if p.ofValue && v != nil {
			diags.Errorf(at, "%s: %s %s", describeLoc(p.loc), describeValue(v), p.msg)
			continue
		}
		if what := describeLoc(p.loc); what != "" {
			diags.Errorf(at, "%s: %s", what, p.msg)
		} else {
			diags.Errorf(at, "%s", p.msg)
		}
	}
	return diags
}

func (sv *schemaValidator) validate(tree *value) []problem {
	err := sv.schema.Validate(tree.plain())
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []problem{{msg: err.Error()}}
	}
	var out []problem
	sv.collect(ve, &out)
	// The validator walks objects in map order: sort for stable output.
	keys := make(map[*problem]string, len(out))
	for i := range out {
		keys[&out[i]] = strings.Join(out[i].loc, "/") + "\x00" + out[i].msg
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return keys[&out[idx[a]]] < keys[&out[idx[b]]] })
	sorted := make([]problem, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

func (sv *schemaValidator) collect(e *jsonschema.ValidationError, out *[]problem) {
	if msg := ownMessage(e.SchemaURL); msg != "" {
		loc := strings.Join(e.InstanceLocation, "/")
		for _, p := range *out {
			if p.ofValue && p.msg == msg && strings.Join(p.loc, "/") == loc {
				return // another keyword of the same schema: said once
			}
		}
		*out = append(*out, problem{loc: e.InstanceLocation, msg: msg, ofValue: true})
		return
	}
	if k, ok := e.ErrorKind.(*jskind.AdditionalProperties); ok {
		known := sv.knownKeys(e.SchemaURL)
		for _, p := range k.Properties {
			loc := append(append([]string(nil), e.InstanceLocation...), p)
			*out = append(*out, problem{loc: loc, unknown: p, known: known})
		}
		return
	}
	if len(e.Causes) == 0 {
		*out = append(*out, problem{loc: e.InstanceLocation, msg: sv.message(e.ErrorKind)})
		return
	}
	for _, c := range e.Causes {
		sv.collect(c, out)
	}
}

func (sv *schemaValidator) message(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *jskind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = jsonTypeName(w)
		}
		return fmt.Sprintf("expected %s, got %s", strings.Join(want, " or "), jsonTypeName(k.Got))
	case *jskind.Required:
		q := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			q[i] = strconv.Quote(m)
		}
		if len(q) == 1 {
			return "missing required key " + q[0]
		}
		return "missing required keys " + strings.Join(q, ", ")
	case *jskind.Minimum:
		return fmt.Sprintf("must be at least %s, got %s", k.Want.FloatString(0), k.Got.FloatString(0))
	case *jskind.Maximum:
		return fmt.Sprintf("must be at most %s, got %s", k.Want.FloatString(0), k.Got.FloatString(0))
	default:
		return k.LocalizedString(sv.printer)
	}
}

func jsonTypeName(t string) string {
	switch t {
	case "object":
		return "a mapping"
	case "array":
		return "a list"
	case "string":
		return "a string"
	case "integer":
		return "an integer"
	case "number":
		return "a number"
	case "boolean":
		return "true or false"
	case "null":
		return "a value (got nothing)"
	}
	return t
}

// describeValue shows a value in a message: a scalar as written (a string
// quoted), else its kind.
func describeValue(v *value) string {
	if v.kind == kindMap || v.kind == kindSeq {
		return v.kind.String()
	}
	return v.text()
}

// describeLoc names the place a problem is at, e.g. services.web.instances.
func describeLoc(loc []string) string {
	return strings.Join(loc, ".")
}

// knownKeys lists the properties of the schema at schemaURL (the one whose
// additionalProperties refused a key).
func (sv *schemaValidator) knownKeys(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil
	}
	node := sv.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = jsonpointer.Unescape(tok)
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[tok]
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unknownHint suggests the key meant, or lists the keys allowed.
func unknownHint(p problem) string {
	hint := source.Suggest(p.unknown, p.known)
	if hint == "" && len(p.known) > 0 {
		hint = "; allowed here: " + strings.Join(p.known, ", ")
	}
	return hint
}
