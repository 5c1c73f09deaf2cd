package progress

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gcompose/gcompose/schemas"
)

const schemaURL = "https://gcompose.dev/schemas/events.schema.json"

var compileSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	raw, err := schemas.FS.ReadFile("events.schema.json")
	if err != nil {
		return nil, fmt.Errorf("read events schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse events schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("add events schema: %w", err)
	}
	return c.Compile(schemaURL)
})

// ValidateLine checks one line of the JSON stream against
// schemas/events.schema.json.
func ValidateLine(line []byte) error {
	sch, err := compileSchema()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(v)
}
