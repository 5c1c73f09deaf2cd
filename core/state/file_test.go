package state_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gcompose/gcompose/core/state"
	"github.com/gcompose/gcompose/core/state/statetest"
	"github.com/gcompose/gcompose/internal/golden"
	"github.com/gcompose/gcompose/internal/syncwriter"
)

const helperEnv = "GCOMPOSE_STATE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func newFileStore(t *testing.T, dir string) (*state.FileStore, *syncwriter.Buffer) {
	t.Helper()
	logs := &syncwriter.Buffer{}
	s, err := state.NewFileStore(dir, state.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

func lock(t *testing.T, s state.Store, app string) *state.Lock {
	t.Helper()
	l, err := s.Lock(context.Background(), app, state.NewLockInfo("deploy", "test"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return l
}

func apply(t *testing.T, s state.Store, l *state.Lock, changes ...state.Change) {
	t.Helper()
	if err := s.Apply(context.Background(), l, changes...); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func load(t *testing.T, s state.Store, app string) *state.Document {
	t.Helper()
	d, err := s.Load(context.Background(), app)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return d
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestDocumentFormat pins the JSON field names (docs/state.md documents them).
func TestDocumentFormat(t *testing.T) {
	at := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	doc := &state.Document{
		FormatVersion: state.FormatVersion,
		Lineage:       "6f1c2a9e-3b7d-4c1e-9a5f-2d8e4b6c0a11",
		Serial:        7,
		App:           "shop",
		UpdatedAt:     at,
		Resources: map[string]*state.Resource{
			"db": {
				Name: "db", Type: "gcompose/golem-service:dev", ImageID: "sha256:abcd", Status: state.StatusPending,
				Config:       map[string]any{"payload": "postgres"},
				State:        map[string]any{"ip": "192.168.0.2"},
				Identity:     map[string]any{"agreement_id": "agr-1", "activity_id": "act-1"},
				Dependencies: []string{"net"},
				Pending:      &state.Operation{ID: "op-1", Kind: state.OpCreate, Action: "create", StartedAt: at, Holder: "root@host pid 1", LockID: "lock-1"},
				UpdatedAt:    at,
			},
			"net": {Name: "net", Type: "gcompose/golem-network:dev", Status: state.StatusActive, UpdatedAt: at},
		},
	}
	got, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "document.golden.json")
	// A difference is a change of the document format: docs/state.md too.
	golden.Check(t, path, append(got, '\n'))
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back state.Document
	if err := json.Unmarshal(want, &back); err != nil {
		t.Fatal(err)
	}
	if back.Resources["db"].Pending.Kind != state.OpCreate || back.Serial != 7 {
		t.Fatalf("round trip: %+v", back)
	}
}

func TestCloneIsDeep(t *testing.T) {
	r := statetest.Res("a", 1)
	r.Pending = &state.Operation{ID: "x"}
	c := r.Clone()
	c.Config["tags"].([]any)[1].(map[string]any)["k"] = "changed"
	c.Dependencies[0] = "changed"
	c.Pending.ID = "changed"
	c.Identity["agreement_id"] = "changed"
	if r.Config["tags"].([]any)[1].(map[string]any)["k"] != "v" || r.Dependencies[0] != "base" || r.Pending.ID != "x" || r.Identity["agreement_id"] != "agr-a-1" {
		t.Fatalf("Clone shares data: %+v", r)
	}
	d := state.NewDocument("a")
	d.Resources["a"] = r
	dc := d.Clone()
	dc.Resources["a"].Status = state.StatusTerminated
	if r.Status != state.StatusActive {
		t.Fatalf("Document.Clone shares resources")
	}
}

func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "shop")
	lockData, err := os.ReadFile(filepath.Join(dir, "shop.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var li state.LockInfo
	if err := json.Unmarshal(lockData, &li); err != nil || li.ID != l.Info.ID || li.Operation != "deploy" || li.PID != os.Getpid() || li.Version != "test" || li.Created.IsZero() ||
		!strings.Contains(li.Holder, fmt.Sprintf(" pid %d", os.Getpid())) || !li.OSLock {
		t.Fatalf("lock file %s: %v", lockData, err)
	}
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	apply(t, s, l, state.Put(statetest.Res("b", 1)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "shop.journal shop.journal.backup shop.json shop.json.backup shop.lock" {
		t.Fatalf("state directory holds %s", got)
	}
	// The lock file stays (its OS lock is what locks); released, it is empty.
	if n := size(t, s.LockPath("shop")); n != 0 {
		t.Fatalf("released lock file holds %d bytes", n)
	}
	if s.DocPath("shop") != filepath.Join(dir, "shop.json") || s.LockPath("shop") != filepath.Join(dir, "shop.lock") {
		t.Fatalf("paths: %s %s", s.DocPath("shop"), s.LockPath("shop"))
	}
}

func TestAppNames(t *testing.T) {
	s, _ := newFileStore(t, t.TempDir())
	for _, app := range []string{"", "../x", "a/b", ".hidden", "a b", "x..y"} {
		if _, err := s.Load(context.Background(), app); err == nil {
			t.Errorf("Load(%q) accepted", app)
		}
		if _, err := s.Lock(context.Background(), app, state.NewLockInfo("deploy", "")); err == nil {
			t.Errorf("Lock(%q) accepted", app)
		}
	}
	for _, app := range []string{"shop", "my-app_2", "a.b"} {
		if _, err := s.Load(context.Background(), app); err != nil {
			t.Errorf("Load(%q): %v", app, err)
		}
	}
}

// A crash between writing the temp file and renaming it: the document is
// the old one, nothing is lost, and the next lock removes the temp file.
func TestAtomicWriteCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s, logs := newFileStore(t, dir)
	l := lock(t, s, "app")
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	apply(t, s, l, state.Put(statetest.Res("b", 2)))
	want := load(t, s, "app")
	// The compaction that would have folded b in died after writing its
	// temp file (here: half of it).
	full, _ := json.Marshal(want)
	tmp := s.DocPath("app") + ".tmp-" + state.NewID()
	if err := os.WriteFile(tmp, full[:len(full)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	s2, _ := newFileStore(t, dir)
	got := load(t, s2, "app")
	if got.Serial != want.Serial || strings.Join(got.Names(), ",") != "a,b" {
		t.Fatalf("after crash: serial %d names %v", got.Serial, got.Names())
	}
	if apps, _ := s2.Apps(context.Background()); strings.Join(apps, ",") != "app" {
		t.Fatalf("Apps lists temp files: %v", apps)
	}
	lock(t, s, "app")
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file left after Lock: %v", err)
	}
	if !strings.Contains(logs.String(), "temp file") {
		t.Fatalf("no warning about the temp file: %s", logs)
	}
}

func TestJournalReplay(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	for i := range 10 {
		apply(t, s, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i)))
	}
	apply(t, s, l, state.Delete("r3"), state.Put(statetest.Res("r9", 99)))
	if _, err := os.Stat(s.DocPath("app")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Apply wrote the document: %v", err)
	}
	// The journal holds one line per Apply.
	data, _ := os.ReadFile(s.JournalPath("app"))
	if n := bytes.Count(data, []byte("\n")); n != 11 {
		t.Fatalf("journal has %d lines, want 11", n)
	}
	// A process that never compacted (killed): another one replays.
	s2, _ := newFileStore(t, dir)
	d := load(t, s2, "app")
	if d.Serial != 11 || len(d.Resources) != 9 || d.Resources["r9"].Config["n"] != float64(99) || d.Resources["r3"] != nil {
		t.Fatalf("replayed: serial %d, names %v", d.Serial, d.Names())
	}
}

func TestTornLastLine(t *testing.T) {
	for name, tail := range map[string]func(full []byte) []byte{
		"partial line":               func(full []byte) []byte { return full[:len(full)/2] },
		"complete but no newline":    func(full []byte) []byte { return bytes.TrimRight(full, "\n") },
		"garbage with newline":       func([]byte) []byte { return []byte("{\"serial\":4,\"lin\x00\x00\n") },
		"zeroes (block not written)": func([]byte) []byte { return make([]byte, 512) },
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, logs := newFileStore(t, dir)
			l := lock(t, s, "app")
			for i := range 3 {
				apply(t, s, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i)))
			}
			jpath := s.JournalPath("app")
			before, _ := os.ReadFile(jpath)
			// The line a 4th Apply would write, torn by a crash.
			lastStart := bytes.LastIndexByte(before[:len(before)-1], '\n') + 1
			line := bytes.Replace(before[lastStart:], []byte(`"serial":3`), []byte(`"serial":4`), 1)
			f, _ := os.OpenFile(jpath, os.O_APPEND|os.O_WRONLY, 0)
			f.Write(tail(line))
			f.Close()
			if err := s.Unlock(context.Background(), l); err != nil {
				t.Fatal(err)
			}

			s2, logs2 := newFileStore(t, dir)
			d := load(t, s2, "app")
			if d.Serial != 3 || len(d.Resources) != 3 {
				t.Fatalf("load with a torn line: serial %d, %d resources", d.Serial, len(d.Resources))
			}
			if !strings.Contains(logs2.String(), "torn last line") {
				t.Fatalf("no warning: %q", logs2)
			}
			// The next writer trims the tail and continues on a clean line.
			l2 := lock(t, s2, "app")
			if got, _ := os.ReadFile(jpath); !bytes.Equal(got, before) {
				t.Fatalf("Lock did not trim the torn tail")
			}
			apply(t, s2, l2, state.Put(statetest.Res("r3", 3)))
			s3, logs3 := newFileStore(t, dir)
			if d := load(t, s3, "app"); d.Serial != 4 || len(d.Resources) != 4 {
				t.Fatalf("after trim + apply: serial %d, %d resources", d.Serial, len(d.Resources))
			}
			if logs3.String() != "" {
				t.Fatalf("warnings after the trim: %s", logs3)
			}
			_ = logs
		})
	}
}

func TestCorruptJournal(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	for i := range 3 {
		apply(t, s, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i)))
	}
	jpath := s.JournalPath("app")
	data, _ := os.ReadFile(jpath)
	lines := bytes.SplitAfter(data, []byte("\n"))

	corrupt := append(append([]byte("not json\n"), lines[1]...), lines[2]...)
	os.WriteFile(jpath, append(lines[0], corrupt...), 0o600)
	if _, err := s.Load(context.Background(), "app"); err == nil || !strings.Contains(err.Error(), "line 2 is not JSON") || !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), jpath) {
		t.Fatalf("corrupt middle line: %v", err)
	}
	// A missing entry (a gap in serials) is an error too.
	os.WriteFile(jpath, append(append([]byte{}, lines[0]...), lines[2]...), 0o600)
	if _, err := s.Load(context.Background(), "app"); err == nil || !strings.Contains(err.Error(), "does not follow") {
		t.Fatalf("gap: %v", err)
	}
	// Writes are refused while the state is unreadable, but a forced
	// replace (state push --force) repairs it.
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	l = lock(t, s, "app")
	if err := s.Apply(context.Background(), l, state.Put(statetest.Res("x", 1))); err == nil || !strings.Contains(err.Error(), "does not follow") {
		t.Fatalf("Apply on an unreadable state: %v", err)
	}
	if err := s.Replace(context.Background(), l, state.NewDocument("app"), false); err == nil {
		t.Fatalf("unforced Replace of an unreadable state accepted")
	}
	fixed := state.NewDocument("app")
	fixed.Resources["x"] = statetest.Res("x", 1)
	if err := s.Replace(context.Background(), l, fixed, true); err != nil {
		t.Fatal(err)
	}
	if d := load(t, s, "app"); strings.Join(d.Names(), ",") != "x" || size(t, jpath) != 0 {
		t.Fatalf("after repair: %v", d.Names())
	}
}

func TestCompactionAndBackup(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	ctx := context.Background()
	l := lock(t, s, "app")
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.BackupPath("app")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a backup of nothing: %v", err)
	}
	if size(t, s.JournalPath("app")) != 0 {
		t.Fatalf("journal not emptied by compaction")
	}
	first, _ := os.ReadFile(s.DocPath("app"))

	apply(t, s, l, state.Put(statetest.Res("b", 2)))
	apply(t, s, l, state.Delete("a"))
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	if backup, _ := os.ReadFile(s.BackupPath("app")); !bytes.Equal(backup, first) {
		t.Fatalf("backup is not the previous document:\n%s\nwant\n%s", backup, first)
	}
	var onDisk state.Document
	data, _ := os.ReadFile(s.DocPath("app"))
	if err := json.Unmarshal(data, &onDisk); err != nil {
		t.Fatal(err)
	}
	if onDisk.Serial != 3 || strings.Join(onDisk.Names(), ",") != "b" || onDisk.FormatVersion != state.FormatVersion || onDisk.Lineage == "" {
		t.Fatalf("compacted document: serial %d names %v", onDisk.Serial, onDisk.Names())
	}
	// Nothing new: compaction is a no-op and the backup stays.
	if err := s.Compact(ctx, l); err != nil {
		t.Fatal(err)
	}
	if backup, _ := os.ReadFile(s.BackupPath("app")); !bytes.Equal(backup, first) {
		t.Fatalf("an empty compaction replaced the backup")
	}
}

// A crash after the compacted document was renamed into place but before
// the journal was emptied: replay skips the entries the document holds.
func TestCrashDuringCompaction(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	for i := range 3 {
		apply(t, s, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i)))
	}
	journal, _ := os.ReadFile(s.JournalPath("app"))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.JournalPath("app"), journal, 0o600); err != nil {
		t.Fatal(err)
	}
	s.Unlock(context.Background(), l)
	s2, logs := newFileStore(t, dir)
	if d := load(t, s2, "app"); d.Serial != 3 || len(d.Resources) != 3 {
		t.Fatalf("serial %d, %d resources", d.Serial, len(d.Resources))
	}
	l2 := lock(t, s2, "app")
	apply(t, s2, l2, state.Put(statetest.Res("r3", 3)))
	if d := load(t, s2, "app"); d.Serial != 4 || len(d.Resources) != 4 {
		t.Fatalf("serial %d, %d resources", d.Serial, len(d.Resources))
	}
	if logs.String() != "" {
		t.Fatalf("warnings: %s", logs)
	}
}

func TestFormatVersionTooNew(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	os.WriteFile(s.DocPath("app"), []byte(`{"format_version": 99, "app": "app", "serial": 1, "lineage": "x", "resources": {}}`), 0o600)
	if _, err := s.Load(context.Background(), "app"); err == nil || !strings.Contains(err.Error(), "format version 99") {
		t.Fatalf("Load of a future format: %v", err)
	}
}

// Journal bytes grow with the changes, not with the document: N puts cost
// N lines of about one resource each (no rewrite of the whole document).
func TestJournalIsLinear(t *testing.T) {
	s, _ := newFileStore(t, t.TempDir())
	l := lock(t, s, "app")
	apply(t, s, l, state.Put(statetest.Res("r0", 0)))
	one := size(t, s.JournalPath("app"))
	const n = 300
	for i := 1; i < n; i++ {
		apply(t, s, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i)))
	}
	if got := size(t, s.JournalPath("app")); got > n*one*11/10 {
		t.Fatalf("journal of %d puts is %d bytes; one put is %d", n, got, one)
	}
}

// A lock file written by an older gcompose (no OS lock, no os_lock mark)
// may belong to a running one: it is refused, and gcompose unlock removes it.
func TestLegacyLockFile(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	info := state.NewLockInfo("deploy", "0.1.0")
	info.ID = "old-lock"
	data, _ := json.MarshalIndent(info, "", "  ")
	if err := os.WriteFile(s.LockPath("app"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := s.Lock(context.Background(), "app", state.NewLockInfo("deploy", "test"))
	if !errors.Is(err, state.ErrLocked) || !strings.Contains(err.Error(), "older gcompose") || !strings.Contains(err.Error(), "gcompose unlock old-lock") {
		t.Fatalf("legacy lock file: %v", err)
	}
	if i, err := s.LockInfo(context.Background(), "app"); err != nil || i == nil || i.ID != "old-lock" {
		t.Fatalf("LockInfo of a legacy lock: %+v, %v", i, err)
	}
	if err := s.ForceUnlock(context.Background(), "app", "old-lock"); err != nil {
		t.Fatal(err)
	}
	if l := lock(t, s, "app"); l.Previous != nil {
		t.Fatalf("after unlock, Previous = %+v", l.Previous)
	}
}

// Removing the lock file by hand would let another process lock a new one:
// the holder's writes are refused from then on, never interleaved.
func TestLockFileRemovedFencesWrites(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	if err := os.Remove(s.LockPath("app")); err != nil {
		t.Fatal(err)
	}
	out, err := helperCmd(dir, "app", "try").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "LOCKED") {
		t.Fatalf("another process, after the lock file was removed: %v: %s", err, out)
	}
	for name, err := range map[string]error{
		"Apply":   s.Apply(context.Background(), l, state.Put(statetest.Res("b", 1))),
		"Compact": s.Compact(context.Background(), l),
	} {
		if !errors.Is(err, state.ErrLockNotHeld) || !strings.Contains(err.Error(), "removed or replaced") {
			t.Errorf("%s after the lock file was removed: %v", name, err)
		}
	}
	if d := load(t, s, "app"); strings.Join(d.Names(), ",") != "a" {
		t.Fatalf("state: %v", d.Names())
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		url, kind, err string
	}{
		{url: "file://" + filepath.Join(dir, "a"), kind: "file"},
		{url: filepath.Join(dir, "b"), kind: "file"},
		{url: "mem://", kind: "memory"},
		{url: "etcd://localhost:2379/gcompose", err: "unknown scheme"}, // stateurl.Open opens etcd
		{url: "s3://bucket/x", err: "unknown scheme"},
		{url: "file://", err: "empty path"},
	} {
		s, err := state.Open(tc.url, state.Options{})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q): %v, want %q", tc.url, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		switch s.(type) {
		case *state.FileStore:
			if tc.kind != "file" {
				t.Errorf("Open(%q) is a file store", tc.url)
			}
		case *state.MemoryStore:
			if tc.kind != "memory" {
				t.Errorf("Open(%q) is a memory store", tc.url)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || !fi.IsDir() {
		t.Fatalf("file:// did not create the directory: %v", err)
	}
}

// --- a second process ---

// helper runs in a re-executed test binary. Modes:
//
//	hold:  lock, print "LOCKED <id>", unlock on a "release" line from stdin
//	try:   lock once; print the error and exit 3 if locked
//	steal: force-unlock $LOCK_ID, lock, put resource "stolen", unlock
func helper(mode string) int {
	ctx := context.Background()
	s, err := state.NewFileStore(os.Getenv("STATE_DIR"), state.Options{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	app := os.Getenv("STATE_APP")
	switch mode {
	case "hold":
		l, err := s.Lock(ctx, app, state.NewLockInfo("deploy", "helper"))
		if err != nil {
			fmt.Println(err)
			return 3
		}
		fmt.Println("LOCKED", l.Info.ID)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "release" {
				if err := s.Unlock(ctx, l); err != nil {
					fmt.Println(err)
					return 1
				}
				fmt.Println("RELEASED")
				return 0
			}
		}
		return 0
	case "spam":
		// Apply puts until killed, compacting every 37 of them; "OK i"
		// once put i is durable.
		l, err := s.Lock(ctx, app, state.NewLockInfo("deploy", "helper"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		for i := 0; ; i++ {
			if err := s.Apply(ctx, l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i))); err != nil {
				fmt.Println(err)
				return 1
			}
			fmt.Println("OK", i)
			if i%37 == 36 {
				if err := s.Compact(ctx, l); err != nil {
					fmt.Println(err)
					return 1
				}
			}
		}
	case "spam-parallel":
		// 16 writers Apply puts w<j>-<i> at once (sharing fsyncs), until
		// killed; one compacts every 50 of its puts. "OK name" once that
		// put is durable.
		l, err := s.Lock(ctx, app, state.NewLockInfo("deploy", "helper"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		var out sync.Mutex
		fail := make(chan error, 1)
		for j := range 16 {
			go func() {
				for i := 0; ; i++ {
					name := fmt.Sprintf("w%d-%d", j, i)
					err := s.Apply(ctx, l, state.Put(statetest.Res(name, i)))
					if err == nil && j == 0 && i%50 == 49 {
						err = s.Compact(ctx, l)
					}
					if err != nil {
						fail <- err
						return
					}
					out.Lock()
					fmt.Println("OK", name)
					out.Unlock()
				}
			}()
		}
		fmt.Println(<-fail)
		return 1
	case "try":
		l, err := s.Lock(ctx, app, state.NewLockInfo("destroy", "helper"))
		if err != nil {
			fmt.Println(err)
			if errors.Is(err, state.ErrLocked) {
				return 3
			}
			return 1
		}
		s.Unlock(ctx, l)
		fmt.Println("LOCKED", l.Info.ID)
		return 0
	case "steal":
		if err := s.ForceUnlock(ctx, app, os.Getenv("LOCK_ID")); err != nil {
			fmt.Println(err)
			return 1
		}
		l, err := s.Lock(ctx, app, state.NewLockInfo("deploy", "helper"))
		if err != nil {
			fmt.Println(err)
			return 1
		}
		if err := s.Apply(ctx, l, state.Put(&state.Resource{Name: "stolen", Status: state.StatusActive})); err != nil {
			fmt.Println(err)
			return 1
		}
		if err := s.Unlock(ctx, l); err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("STOLEN")
		return 0
	}
	fmt.Println("unknown helper mode", mode)
	return 2
}

func helperCmd(dir, app, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "STATE_DIR="+dir, "STATE_APP="+app)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

func TestSecondProcessRefused(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "shop")
	out, err := helperCmd(dir, "shop", "try").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("second process: %v: %s", err, out)
	}
	if l.Info.PID != os.Getpid() {
		t.Fatalf("lock info pid %d, this process is %d", l.Info.PID, os.Getpid())
	}
	want := fmt.Sprintf(`state for app "shop" is locked by %s for deploy since %s; lock ID %s; the OS holds it for that process and releases it the moment the process ends, killed or not (--lock-timeout waits for it)`,
		l.Info.Who(), l.Info.Created.Format(time.RFC3339), l.Info.ID)
	if strings.TrimSpace(string(out)) != want {
		t.Fatalf("second process said\n%s\nwant\n%s", out, want)
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if out, err := helperCmd(dir, "shop", "try").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "LOCKED") {
		t.Fatalf("after unlock, second process: %v: %s", err, out)
	}
}

// holder starts a helper process holding app's lock.
type holder struct {
	cmd   *exec.Cmd
	stdin *os.File
	out   *bufio.Scanner
	id    string
}

func startHolder(t *testing.T, dir, app string) *holder {
	t.Helper()
	cmd := helperCmd(dir, app, "hold")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = pr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	h := &holder{cmd: cmd, stdin: pw, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		pw.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	if !h.out.Scan() {
		t.Fatalf("holder said nothing")
	}
	line := h.out.Text()
	id, ok := strings.CutPrefix(line, "LOCKED ")
	if !ok {
		t.Fatalf("holder: %s", line)
	}
	h.id = id
	return h
}

// A holder killed with SIGKILL loses its lock at once: the kernel releases
// the OS lock, and the next Lock says who ended without releasing it.
func TestSecondProcessKilledReleasesLock(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	h := startHolder(t, dir, "shop")
	_, err := s.Lock(context.Background(), "shop", state.NewLockInfo("deploy", "test"))
	var le *state.LockedError
	if !errors.As(err, &le) || le.Info.PID != h.cmd.Process.Pid || le.Info.ID != h.id || !strings.Contains(err.Error(), "releases it the moment the process ends") {
		t.Fatalf("lock held by a live process: %v", err)
	}
	if err := s.ForceUnlock(context.Background(), "shop", h.id); err == nil || !strings.Contains(err.Error(), "running process") {
		t.Fatalf("ForceUnlock of a live holder: %v", err)
	}
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()
	if i, err := s.LockInfo(context.Background(), "shop"); err != nil || i != nil {
		t.Fatalf("LockInfo after the holder was killed: %+v, %v", i, err)
	}
	l := lock(t, s, "shop")
	if l.Previous == nil || l.Previous.ID != h.id || l.Previous.PID != h.cmd.Process.Pid {
		t.Fatalf("Previous = %+v, want the killed holder %s", l.Previous, h.id)
	}
}

// A second process cannot take a live holder's lock with ForceUnlock; the
// holder's writes go on.
func TestSecondProcessCannotStealLiveLock(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "shop")
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	out, err := helperCmd(dir, "shop", "steal", "LOCK_ID="+l.Info.ID).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "held by a running process") {
		t.Fatalf("steal: %v: %s", err, out)
	}
	apply(t, s, l, state.Put(statetest.Res("b", 1)))
	if err := s.Compact(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if d := load(t, s, "shop"); strings.Join(d.Names(), ",") != "a,b" || d.Serial != 2 {
		t.Fatalf("state: serial %d names %v", d.Serial, d.Names())
	}
}

func TestSecondProcessLockTimeoutWaits(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	h := startHolder(t, dir, "shop")
	start := time.Now()
	go func() {
		time.Sleep(400 * time.Millisecond)
		fmt.Fprintln(h.stdin, "release")
	}()
	l, err := state.Acquire(context.Background(), s, "shop", state.NewLockInfo("deploy", "test"), 30*time.Second)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if time.Since(start) < 400*time.Millisecond {
		t.Fatalf("acquired before the holder released")
	}
	if !h.out.Scan() || h.out.Text() != "RELEASED" {
		t.Fatalf("holder: %q", h.out.Text())
	}
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
}

// Concurrent writers of one lock share fsyncs; the journal still holds one
// line per Apply, in serial order, and a fresh reader replays them all.
func TestGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Apply(context.Background(), l, state.Put(statetest.Res(fmt.Sprintf("r%d", i), i))); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	data, _ := os.ReadFile(s.JournalPath("app"))
	for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var e struct{ Serial uint64 }
		if err := json.Unmarshal(line, &e); err != nil || e.Serial != uint64(i+1) {
			t.Fatalf("line %d: serial %d, %v", i+1, e.Serial, err)
		}
	}
	if err := s.Unlock(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	s2, _ := newFileStore(t, dir)
	if d := load(t, s2, "app"); d.Serial != n || len(d.Resources) != n {
		t.Fatalf("replayed: serial %d, %d resources", d.Serial, len(d.Resources))
	}
}

// A writer killed with SIGKILL at arbitrary moments (during appends and
// compactions): every put it reported durable is there, the state loads,
// the lock is free at once, and the next run continues the serials.
func TestSecondProcessKilledMidWrite(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	ctx := context.Background()
	base := 0 // resources r0..r(base-1) exist from earlier rounds
	for round, stopAt := range []int{5, 80, 150} {
		cmd := helperCmd(dir, "app", "spam")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		last := -1
		for sc.Scan() {
			var i int
			if _, err := fmt.Sscanf(sc.Text(), "OK %d", &i); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: writer said %q", round, sc.Text())
			}
			last = i
			if i >= stopAt {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		d, err := s.Load(ctx, "app")
		if err != nil {
			t.Fatalf("round %d: load after kill: %v", round, err)
		}
		for i := 0; i <= max(last, base-1); i++ {
			if d.Resources[fmt.Sprintf("r%d", i)] == nil {
				t.Fatalf("round %d: r%d reported durable but missing (serial %d)", round, i, d.Serial)
			}
		}
		if info, err := s.LockInfo(ctx, "app"); err != nil || info != nil {
			t.Fatalf("round %d: lock after kill: %+v, %v", round, info, err)
		}
		l := lock(t, s, "app")
		if l.Previous == nil || l.Previous.PID != cmd.Process.Pid {
			t.Fatalf("round %d: Previous = %+v, want the killed writer", round, l.Previous)
		}
		apply(t, s, l, state.Put(statetest.Res("after", round)))
		if d2 := load(t, s, "app"); d2.Serial != d.Serial+1 || d2.Lineage != d.Lineage {
			t.Fatalf("round %d: serial %d→%d lineage %s→%s", round, d.Serial, d2.Serial, d.Lineage, d2.Lineage)
		}
		if err := s.Unlock(ctx, l); err != nil {
			t.Fatal(err)
		}
		base = max(base, last+1)
	}
}

// Group commit keeps the crash guarantee: 16 writers of one lock share
// fsyncs (and one compacts now and then) until SIGKILL at arbitrary moments;
// every put any of them reported durable is there, the state loads, and the
// next holder continues the serials.
func TestSecondProcessKilledMidGroupCommit(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	ctx := context.Background()
	durable := map[string]bool{} // every put reported durable, all rounds
	for round, stopAt := range []int{1, 40, 300, 1000} {
		cmd := helperCmd(dir, "app", "spam-parallel")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		oks := 0
		for sc.Scan() {
			name, ok := strings.CutPrefix(sc.Text(), "OK ")
			if !ok {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("round %d: writer said %q", round, sc.Text())
			}
			durable[fmt.Sprintf("%d/%s", round, name)] = true
			if oks++; oks >= stopAt {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		d, err := s.Load(ctx, "app")
		if err != nil {
			t.Fatalf("round %d: load after kill: %v", round, err)
		}
		for key := range durable {
			r, name, _ := strings.Cut(key, "/")
			if r == fmt.Sprint(round) && d.Resources[name] == nil {
				t.Fatalf("round %d: %s reported durable but missing (serial %d)", round, name, d.Serial)
			}
		}
		if info, err := s.LockInfo(ctx, "app"); err != nil || info != nil {
			t.Fatalf("round %d: lock after kill: %+v, %v", round, info, err)
		}
		l := lock(t, s, "app")
		apply(t, s, l, state.Put(statetest.Res("after", round)))
		if d2 := load(t, s, "app"); d2.Serial != d.Serial+1 || d2.Lineage != d.Lineage {
			t.Fatalf("round %d: serial %d→%d lineage %s→%s", round, d.Serial, d2.Serial, d.Lineage, d2.Lineage)
		}
		// The next round's writers put the same names again: start from
		// nothing so that a missing put cannot hide behind an older one.
		for name := range d.Resources {
			apply(t, s, l, state.Delete(name))
		}
		if err := s.Unlock(ctx, l); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d puts reported durable; the state held %d (serial %d)", round, oks, len(d.Resources), d.Serial)
	}
}

// Close lets the OS locks go, as the end of the process does: later writes
// of the lock are refused, and the next holder learns it was not released.
func TestCloseReleasesLock(t *testing.T) {
	dir := t.TempDir()
	s, _ := newFileStore(t, dir)
	l := lock(t, s, "app")
	apply(t, s, l, state.Put(statetest.Res("a", 1)))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(context.Background(), l, state.Put(statetest.Res("b", 1))); !errors.Is(err, state.ErrLockNotHeld) {
		t.Fatalf("Apply after Close: %v", err)
	}
	s2, _ := newFileStore(t, dir)
	if i, err := s2.LockInfo(context.Background(), "app"); err != nil || i != nil {
		t.Fatalf("lock after Close: %+v, %v", i, err)
	}
	if l2 := lock(t, s2, "app"); l2.Previous == nil || l2.Previous.ID != l.Info.ID {
		t.Fatalf("Previous = %+v", l2.Previous)
	}
	if d := load(t, s2, "app"); d.Serial != 1 {
		t.Fatalf("serial %d", d.Serial)
	}
}
