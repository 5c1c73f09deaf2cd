package payments

import (
	"slices"

	"github.com/gcompose/gcompose/adapters/golem/service"
	"github.com/gcompose/gcompose/protocol"
)

// OutputsSchema is the JSON Schema of the payments resource's VALID state,
// declared in the init answer: gcompose refuses a reference to any other
// output at plan time (docs/golem.md has the table). The amounts spent are
// not outputs: they change with every debit note.
var OutputsSchema = map[string]any{
	"type":     "object",
	"required": []any{"allocation_id", "budget", "platform", "keeper", "state"},
	"properties": map[string]any{
		"allocation_id": map[string]any{"type": "string", "description": "the allocation's id on yagna"},
		"budget":        map[string]any{"type": "string", "description": "the allocation's total amount, in GLM, as yagna writes it"},
		"platform":      map[string]any{"type": "string", "description": "the payment platform (erc20-hoodi-tglm, ...)"},
		"keeper":        map[string]any{"type": "string", "description": "the keeper container's short id"},
		"state":         map[string]any{"const": "running"},
	},
	"additionalProperties": false,
}

// initExt is the Golem adapters' InitExt with the payments outputs declared.
func initExt(ext *protocol.InitExt) *protocol.InitExt {
	ext.Outputs = OutputsSchema
	// The market watcher's refresh, when gcompose's environment sets it.
	ext.Env = append(slices.Clone(ext.Env), service.WatchRefreshEnv)
	return ext
}
