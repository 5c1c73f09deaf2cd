package network

import "github.com/gcompose/gcompose/protocol"

// OutputsSchema is the JSON Schema of a network's VALID state, declared in
// the init answer: gcompose refuses a reference to any other output at
// plan time (docs/golem.md has the table). Strict, so that the e2e check
// of every reported state against it catches an output added here but not
// declared.
var OutputsSchema = map[string]any{
	"type":     "object",
	"required": []any{"network_id", "ip", "mask", "owner_ip", "owner_id", "state"},
	"properties": map[string]any{
		"network_id": str("the VPN's id on yagna"),
		"ip":         str("the VPN's network address"),
		"mask":       str("its netmask"),
		"gateway":    str("its gateway, when it has one"),
		"owner_ip":   str("the requestor's address in the VPN"),
		"owner_id":   str("the requestor's node id"),
		"state":      map[string]any{"const": "ready"},
	},
	"additionalProperties": false,
}

func str(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

// initExt is InitExt with the network's outputs declared.
func initExt() *protocol.InitExt {
	ext := InitExt(nil)
	ext.Outputs = OutputsSchema
	return ext
}
