// Package schemas embeds gcompose's JSON Schemas: the descriptor's and one per
// protocol message, so the binary validates without files on disk.
package schemas

import "embed"

// FS holds gaom.schema.json and protocol/*.json.
//
//go:embed *.json protocol/*.json
var FS embed.FS
