package adapter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/gcompose/gcompose/internal/atomicfile"
	"github.com/gcompose/gcompose/protocol"
)

// cacheEntry is one init answer on disk.
type cacheEntry struct {
	ImageID string          `json:"image_id"`
	Answer  json.RawMessage `json:"answer"`
}

func (c *Client) cachePath(id string) string {
	return filepath.Join(c.opts.CacheDir, strings.ReplaceAll(id, ":", "-")+".json")
}

// loadInit reads a cached init answer; anything wrong with it (missing,
// unreadable, no longer valid, another protocol version) means "run init".
func (c *Client) loadInit(id, image string) *Info {
	if c.opts.CacheDir == "" {
		return nil
	}
	raw, err := os.ReadFile(c.cachePath(id))
	if err != nil {
		return nil
	}
	var e cacheEntry
	if err := json.Unmarshal(raw, &e); err != nil || e.ImageID != id {
		return nil
	}
	info, err := c.parseInit(image, id, e.Answer)
	if err != nil || (info.Ext && info.Protocol != protocol.Version) {
		return nil
	}
	c.log.Debug("init answer from cache", "image", image, "id", id)
	return info
}

// saveInit writes the answer atomically; a failure only costs a later init.
func (c *Client) saveInit(id string, answer []byte) {
	if c.opts.CacheDir == "" {
		return
	}
	raw, err := json.Marshal(cacheEntry{ImageID: id, Answer: json.RawMessage(answer)})
	if err == nil {
		err = os.MkdirAll(c.opts.CacheDir, 0o755)
	}
	if err == nil {
		err = atomicfile.WriteFile(c.cachePath(id), raw)
	}
	if err != nil {
		c.log.Warn("cannot cache init answer", "image", id, "err", err)
	}
}
