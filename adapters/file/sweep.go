package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"

	"github.com/gcompose/gcompose/protocol"
	"github.com/gcompose/gcompose/protocol/sdk"
)

// EnvSweep, set to "1" in the adapter's environment (an image variant),
// makes the adapter tag every file it writes and offer sweep: a file whose
// tag names a resource no state knows (a run killed before it recorded
// the file) is found, and terminated (deleted) when asked.
const EnvSweep = "GCOMPOSE_FILE_SWEEP"

// TagDir holds the tags, in the plug directory.
const TagDir = ".gcompose-sweep"

// Tag is what the adapter records of a file it wrote for an application.
type Tag struct {
	App       string `json:"app"`
	Lineage   string `json:"lineage"`
	Name      string `json:"name"`
	Operation string `json:"operation,omitempty"`
	Path      string `json:"path"`
}

func tagFile(app, p string) string {
	sum := sha256.Sum256([]byte(app + "\x00" + p))
	return path.Join(TagDir, hex.EncodeToString(sum[:12])+".json")
}

// WriteTag records t under root, as the create action does (tests use it
// to leave what a killed run leaves).
func WriteTag(root string, t Tag) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	return writeTag(r, t)
}

func writeTag(root *os.Root, t Tag) error {
	if err := root.MkdirAll(TagDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", TagDir, err)
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := root.WriteFile(tagFile(t.App, t.Path), raw, 0o644); err != nil {
		return fmt.Errorf("tag %s: %w", t.Path, err)
	}
	return nil
}

func removeTag(root *os.Root, app, p string) error {
	if err := root.Remove(tagFile(app, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("untag %s: %w", p, err)
	}
	return nil
}

// tag records the file an action wrote, when sweep is on.
func (a *adapter) tag(root *os.Root, req *sdk.Request, p string) error {
	if !a.sweep || req.App() == "" {
		return nil
	}
	t := Tag{App: req.App(), Lineage: req.Lineage(), Name: req.Name, Path: p}
	if op := req.Operation(); op != nil {
		t.Operation = op.ID
	}
	return writeTag(root, t)
}

func (a *adapter) untag(root *os.Root, req *sdk.Request, p string) error {
	if !a.sweep || req.App() == "" {
		return nil
	}
	return removeTag(root, req.App(), p)
}

// sweepFiles finds the tagged files of the request's application whose
// resource no known one names and whose operation no known one has
// pending; with terminate it deletes those of this lineage (only those
// listed, when the request lists some).
func (a *adapter) sweepFiles(ctx context.Context, req *sdk.Request) (*protocol.SweepResult, error) {
	q := req.SweepRequest()
	if q == nil {
		return nil, fmt.Errorf("sweep call without a sweep question")
	}
	root, err := a.open()
	if err != nil {
		return nil, err
	}
	defer root.Close()
	named, pending := map[string]bool{}, map[string]bool{}
	for _, k := range q.Known {
		named[k.Name] = true
		if k.Pending != nil {
			pending[k.Pending.ID] = true
		}
	}
	res := &protocol.SweepResult{Found: []protocol.Orphan{}}
	entries, err := fs.ReadDir(root.FS(), TagDir)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", TagDir, err)
	}
	var tags []Tag
	for _, e := range entries {
		raw, err := root.ReadFile(path.Join(TagDir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read tag %s: %w", e.Name(), err)
		}
		var t Tag
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tag %s is not JSON: %w", e.Name(), err)
		}
		if t.App == req.App() && !named[t.Name] && !pending[t.Operation] {
			tags = append(tags, t)
		}
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i].Path < tags[j].Path })
	for _, t := range tags {
		o := protocol.Orphan{Kind: "file", ID: t.Path, Lineage: t.Lineage, Resource: t.Name, Action: protocol.OrphanReported}
		if t.Operation != "" {
			o.Detail = "written by operation " + t.Operation
		}
		if q.Terminate && t.Lineage == req.Lineage() && (len(q.Only) == 0 || slices.Contains(q.Only, t.Path)) {
			if err := root.Remove(t.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("delete %s: %w", t.Path, err)
			}
			if err := removeTag(root, t.App, t.Path); err != nil {
				return nil, err
			}
			o.Action = protocol.OrphanTerminated
		}
		res.Found = append(res.Found, o)
	}
	return res, nil
}
