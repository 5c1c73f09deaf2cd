package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
)

// deployed is a state directory after two runs: a compacted document,
// its backup, the journal backup between them, and two journal lines of a
// run that was killed before compacting.
func deployed(t *testing.T) (dir string, s *state.FileStore, want *state.Document) {
	t.Helper()
	dir = t.TempDir()
	s, _ = newFileStore(t, dir)
	ctx := context.Background()
	l := lock(t, s, "shop")
	apply(t, s, l, state.Put(statetest.Res("db", 1)))
	apply(t, s, l, state.Put(statetest.Res("web", 2)))
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	apply(t, s, l, state.Put(statetest.Res("cache", 3)))
	apply(t, s, l, state.Delete("web"))
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	apply(t, s, l, state.Put(statetest.Res("queue", 4)))
	apply(t, s, l, state.Put(statetest.Res("web", 5)))
	if err := s.Unlock(ctx, l); err != nil {
		t.Fatal(err)
	}
	return dir, s, load(t, s, "shop")
}

func mustFail(t *testing.T, s *state.FileStore, app string, target error, wants ...string) string {
	t.Helper()
	_, err := s.Load(context.Background(), app)
	if err == nil || !errors.Is(err, target) {
		t.Fatalf("Load: %v, want %v", err, target)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Load error lacks %q:\n%v", w, err)
		}
	}
	return err.Error()
}

// Every single-bit flip anywhere in the document is detected and names the
// file; nothing damaged is ever loaded.
func TestDocumentEveryFlippedBitDetected(t *testing.T) {
	_, s, _ := deployed(t)
	path := s.DocPath("shop")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(orig, []byte("{\n  \"checksum\": \"sha256:")) {
		t.Fatalf("document without its checksum:\n%s", orig)
	}
	for i := range orig {
		for _, bit := range []byte{0x01, 0x20} {
			b := bytes.Clone(orig)
			b[i] ^= bit
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := s.Load(context.Background(), "shop")
			if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("byte %d (%q) flipped by %#x: Load: %v", i, orig[i], bit, err)
			}
		}
	}
	os.WriteFile(path, orig, 0o600)
	load(t, s, "shop")
}

// An unknown key is refused with its line and column, whether the document
// has a checksum (which then also fails) or not (an older gcompose's).
func TestDocumentUnknownKey(t *testing.T) {
	_, s, _ := deployed(t)
	path := s.DocPath("shop")
	orig, _ := os.ReadFile(path)
	typo := bytes.Replace(orig, []byte(`"status"`), []byte(`"stXtus"`), 1)
	line := 1 + bytes.Count(typo[:bytes.Index(typo, []byte(`"stXtus"`))], []byte("\n"))
	os.WriteFile(path, typo, 0o600)
	msg := mustFail(t, s, "shop", state.ErrCorrupt, path, "checksum mismatch", fmt.Sprintf(`line %d, column 7: unknown key "stXtus"`, line))
	t.Logf("sealed document with stXtus: %s", msg)

	// Without the checksum line (as an older gcompose wrote it).
	lines := bytes.SplitN(typo, []byte("\n"), 3)
	legacy := append(append(lines[0], '\n'), lines[2]...)
	os.WriteFile(path, legacy, 0o600)
	msg = mustFail(t, s, "shop", state.ErrCorrupt, path, fmt.Sprintf(`line %d, column 7: unknown key "stXtus"`, line-1))
	t.Logf("document without a checksum, with stXtus: %s", msg)
}

// An unknown key holding <, > or & is placed and named as it is in the
// file, whether written as typed (a hand edit) or HTML-escaped (as
// encoding/json writes it by default), not as its escaped form only.
func TestUnknownKeyWithMarkupIsPlaced(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"plain", `{"name": "db", "stXtus": 1}`, `line 1, column 16: unknown key "stXtus"`},
		{"less than, as typed", `{"name": "db",` + "\n" + `  "a<b": 1}`, `line 2, column 3: unknown key "a<b"`},
		{"greater than and ampersand, as typed", `{"x>y&z" : 1}`, `line 1, column 2: unknown key "x>y&z"`},
		{"escaped as encoding/json writes it", `{"name": "db", "a\u003cb": 1}`, `line 1, column 16: unknown key "a<b"`},
		{"a quote in it", `{"a\"<b": 1}`, `line 1, column 2: unknown key "a\"<b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := state.DecodeResource([]byte(tc.data))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("DecodeResource(%s): %v, want %s", tc.data, err, tc.want)
			}
		})
	}
}

// A document and journal written by an older gcompose (no checksums) load;
// the next holder's Compact rewrites the document with a checksum.
func TestOldDocumentWithoutChecksumIsUpgraded(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	doc := state.NewDocument("shop")
	doc.Lineage, doc.Serial = "old-lineage", 3
	doc.Resources["db"] = statetest.Res("db", 1)
	b, _ := json.MarshalIndent(doc, "", "  ")
	os.WriteFile(s.DocPath("shop"), append(b, '\n'), 0o600)
	line := `{"serial":4,"lineage":"old-lineage","time":"2026-11-22T03:00:00Z","changes":[{"put":{"name":"web","type":"t","status":"Active","updated_at":"2026-11-22T03:00:00Z"}}]}` + "\n"
	os.WriteFile(s.JournalPath("shop"), []byte(line), 0o600)
	if d := load(t, s, "shop"); d.Serial != 4 || strings.Join(d.Names(), ",") != "db,web" {
		t.Fatalf("old state: serial %d, %v", d.Serial, d.Names())
	}
	l := lock(t, s, "shop")
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(s.DocPath("shop"))
	if !bytes.HasPrefix(got, []byte("{\n  \"checksum\": \"sha256:")) {
		t.Fatalf("not upgraded:\n%s", got)
	}
	// Even with nothing journaled, the first holder upgrades.
	os.WriteFile(s.DocPath("shop"), append(b, '\n'), 0o600)
	os.Remove(s.JournalPath("shop"))
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	l = lock(t, s, "shop")
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(s.DocPath("shop")); !bytes.HasPrefix(got, []byte("{\n  \"checksum\"")) {
		t.Fatalf("not upgraded without journal lines:\n%s", got)
	}
	if d := load(t, s, "shop"); d.Serial != 3 || d.Lineage != "old-lineage" {
		t.Fatalf("upgraded: serial %d lineage %s", d.Serial, d.Lineage)
	}
}

// Journal lines: every flipped bit of a line that is not the last, a
// duplicated line and an unknown key are refused with the file and line.
func TestJournalDamageDetected(t *testing.T) {
	_, s, _ := deployed(t)
	jpath := s.JournalPath("shop")
	orig, _ := os.ReadFile(jpath)
	lines := bytes.SplitAfter(orig, []byte("\n"))
	if len(lines) != 3 || len(lines[2]) != 0 {
		t.Fatalf("journal: %q", orig)
	}
	first := len(lines[0])
	for i := 0; i < first; i++ {
		b := bytes.Clone(orig)
		b[i] ^= 0x01
		os.WriteFile(jpath, b, 0o600)
		_, err := s.Load(context.Background(), "shop")
		if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), jpath) || !strings.Contains(err.Error(), "line 1") {
			t.Fatalf("byte %d (%q) of line 1 flipped: %v", i, orig[i], err)
		}
	}
	// The last line: a flip is damage too, except in its newline's place
	// where only a crash could leave a line unended... and a whole line is kept.
	for i := first; i < len(orig)-1; i++ {
		b := bytes.Clone(orig)
		b[i] ^= 0x01
		os.WriteFile(jpath, b, 0o600)
		_, err := s.Load(context.Background(), "shop")
		if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), "line 2") {
			t.Fatalf("byte %d (%q) of the last line flipped: %v", i, orig[i], err)
		}
	}
	b := bytes.Clone(orig)
	b[len(b)-1] ^= 0x01
	os.WriteFile(jpath, b, 0o600)
	mustFail(t, s, "shop", state.ErrCorrupt, "line 2: the newline ending it is damaged")

	dup := append(append(bytes.Clone(lines[0]), lines[0]...), lines[1]...)
	os.WriteFile(jpath, dup, 0o600)
	msg := mustFail(t, s, "shop", state.ErrCorrupt, jpath, "line 2: serial 5 after 5 repeats it (a duplicated line)")
	t.Logf("duplicated journal line: %s", msg)

	typo := bytes.Replace(orig, []byte(`"status"`), []byte(`"stXtus"`), 1)
	os.WriteFile(jpath, typo, 0o600)
	msg = mustFail(t, s, "shop", state.ErrCorrupt, jpath, "line 1: checksum mismatch", `unknown key "stXtus"`)
	t.Logf("journal line with stXtus: %s", msg)
	col := bytes.Index(typo, []byte(`"stXtus"`)) + 1
	if !strings.Contains(msg, fmt.Sprintf("column %d:", col)) {
		t.Fatalf("column of stXtus (%d) not named: %s", col, msg)
	}
	os.WriteFile(jpath, orig, 0o600)
}

// A document deleted (its backup and journals still there), a journal
// without its document: Load refuses to start from nothing and names what
// it found; Recover rebuilds exactly what was there; a forced new state
// keeps the traces aside.
func TestMissingDocument(t *testing.T) {
	dir, s, want := deployed(t)
	os.Remove(s.DocPath("shop"))
	msg := mustFail(t, s, "shop", state.ErrMissingDocument,
		"shop.json.backup (serial 2, lineage "+want.Lineage+", 2 resources)",
		"shop.journal.backup (2 lines, serials 3 to 4)",
		"shop.journal (2 lines, serials 5 to 6)",
		"gcompose state recover --app shop", "--force-new-state")
	t.Logf("APP.json deleted: %s", msg)
	if apps, err := s.Apps(context.Background()); err != nil || strings.Join(apps, ",") != "shop" {
		t.Fatalf("Apps: %v, %v", apps, err)
	}

	rec, err := s.Recover(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recover: %s", rec)
	if len(rec.Lost) != 0 || rec.Doc.Serial != want.Serial || rec.Doc.Lineage != want.Lineage || strings.Join(rec.Doc.Names(), ",") != strings.Join(want.Names(), ",") {
		t.Fatalf("recovered serial %d lineage %s names %v lost %v; want %d %s %v", rec.Doc.Serial, rec.Doc.Lineage, rec.Doc.Names(), rec.Lost, want.Serial, want.Lineage, want.Names())
	}
	l := lock(t, s, "shop")
	if err := s.Apply(context.Background(), l, state.Put(statetest.Res("x", 1))); !errors.Is(err, state.ErrMissingDocument) {
		t.Fatalf("Apply over a missing document: %v", err)
	}
	if err := s.Replace(context.Background(), l, rec.Doc, true); err != nil {
		t.Fatal(err)
	}
	apply(t, s, l, state.Put(statetest.Res("x", 1)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if d := load(t, s, "shop"); d.Lineage != want.Lineage || d.Serial != want.Serial+1 || len(d.Resources) != len(want.Resources)+1 {
		t.Fatalf("after recovery: serial %d lineage %s %v", d.Serial, d.Lineage, d.Names())
	}

	// A forced new state over traces: a new lineage, the traces kept aside.
	os.Remove(s.DocPath("shop"))
	mustFail(t, s, "shop", state.ErrMissingDocument)
	l = lock(t, s, "shop")
	if err := s.Replace(context.Background(), l, state.NewDocument("shop"), true); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	d := load(t, s, "shop")
	if d.Lineage == want.Lineage || len(d.Resources) != 0 {
		t.Fatalf("forced new state: lineage %s, %v", d.Lineage, d.Names())
	}
	// One set aside by the recovery, one by the forced new state.
	aside, _ := filepath.Glob(filepath.Join(dir, "shop.json.backup.old-*"))
	if len(aside) != 2 {
		t.Fatalf("the old backups were not kept aside: %v", aside)
	}
}

// A journal that does not start at serial 1 without its document is a
// trace; one that does is a whole first run (killed before compacting).
func TestJournalWithoutDocument(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "shop")
	apply(t, s, l, state.Put(statetest.Res("db", 1)))
	apply(t, s, l, state.Put(statetest.Res("web", 2)))
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if d := load(t, s, "shop"); d.Serial != 2 {
		t.Fatalf("first run without compaction: serial %d", d.Serial)
	}
	data, _ := os.ReadFile(s.JournalPath("shop"))
	second := bytes.SplitAfter(data, []byte("\n"))[1]
	os.WriteFile(s.JournalPath("shop"), second, 0o600)
	mustFail(t, s, "shop", state.ErrMissingDocument, "shop.journal (1 lines, serials 2 to 2)")
}

// A damaged journal line in the middle: Recover keeps what comes before,
// and names what is lost and which resources it touched.
func TestRecoverStopsAtDamage(t *testing.T) {
	_, s, _ := deployed(t)
	jpath := s.JournalPath("shop")
	orig, _ := os.ReadFile(jpath)
	os.WriteFile(jpath, bytes.Replace(orig, []byte(`"queue"`), []byte(`"queuX"`), 1), 0o600)
	mustFail(t, s, "shop", state.ErrCorrupt, "line 1: checksum mismatch")
	rec, err := s.Recover(context.Background(), "shop")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("recover: %s", rec)
	if rec.Doc.Serial != 4 || strings.Join(rec.LostResources, ",") != "queuX,web" || len(rec.Lost) != 2 {
		t.Fatalf("recovery: serial %d, lost %v, resources %v", rec.Doc.Serial, rec.Lost, rec.LostResources)
	}
}
