package proxy

import "github.com/gcompose/gcompose/protocol"

// OutputsSchema is the JSON Schema of a proxy's VALID state, declared in
// the init answer: gcompose refuses a reference to any other output at
// plan time (docs/golem.md has the table).
var OutputsSchema = map[string]any{
	"type":     "object",
	"required": []any{"ports", "container", "state", "target"},
	"properties": map[string]any{
		"ports": map[string]any{
			"type": "array",
			"items": map[string]any{
				"type":     "object",
				"required": []any{"kind", "local", "remote", "address"},
				"properties": map[string]any{
					"kind":    map[string]any{"enum": []any{"http", "tcp"}},
					"local":   map[string]any{"type": "integer", "description": "the port on the host's loopback"},
					"remote":  map[string]any{"type": "integer", "description": "the port on the service's VPN address"},
					"address": map[string]any{"type": "string", "description": "127.0.0.1:LOCAL"},
					"url":     map[string]any{"type": "string", "description": "http ports: http://127.0.0.1:LOCAL/, tcp ports: tcp://127.0.0.1:LOCAL"},
				},
				"additionalProperties": false,
			},
		},
		"url":       map[string]any{"type": "string", "description": "the first http port's URL, else the first tcp port's"},
		"container": map[string]any{"type": "string", "description": "the proxy container's short id"},
		"state":     map[string]any{"const": "running"},
		"target":    map[string]any{"type": "string", "description": "the service's VPN address"},
		"service":   map[string]any{"type": "string", "description": "the service the proxy is in front of"},
	},
	"additionalProperties": false,
}

// initExt is the Golem adapters' InitExt with the proxy outputs declared.
func initExt(ext *protocol.InitExt) *protocol.InitExt {
	ext.Outputs = OutputsSchema
	return ext
}
