package service

import "github.com/gcompose/gcompose/protocol"

// OutputsSchema is the JSON Schema of a service's VALID state (outputs),
// declared in the init answer: gcompose refuses a reference to any other
// output at plan time (docs/golem.md has the table).
var OutputsSchema = map[string]any{
	"type":     "object",
	"required": []any{"network_node", "agreement", "activity", "state"},
	"properties": map[string]any{
		"network_node": object(map[string]any{
			"ip":      str("the service's address in its VPN (empty without a network)"),
			"node_id": str("the provider's node id"),
		}, "ip", "node_id"),
		"agreement": object(map[string]any{
			"id":            str("the agreement's id"),
			"provider_id":   str("the provider's node id"),
			"provider_name": str("the provider's name, from its offer"),
			"price":         map[string]any{"type": "object", "description": "the agreed price and what it comes to (docs/golem.md, market)"},
		}, "id", "provider_id", "provider_name"),
		"activity": object(map[string]any{"id": str("the activity's id")}, "id"),
		"state":    map[string]any{"const": "running"},
		"logs": map[string]any{
			"type":        "array",
			"description": "what the init commands printed (gcompose logs)",
			"items":       map[string]any{"type": "object"},
		},
	},
	"additionalProperties": false,
}

func str(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

func object(props map[string]any, required ...any) map[string]any {
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

// withOutputs declares the service's outputs in ext.
func withOutputs(ext *protocol.InitExt) *protocol.InitExt {
	ext.Outputs = OutputsSchema
	return ext
}
