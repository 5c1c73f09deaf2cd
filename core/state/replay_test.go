package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// journal returns a journal of n entries, one put each.
func journal(t testing.TB, n int) []byte {
	var buf bytes.Buffer
	lineage := NewID()
	for i := 1; i <= n; i++ {
		r := &Resource{Name: fmt.Sprintf("r%d", i), Status: StatusActive, Config: map[string]any{"n": float64(i), "s": "x\ny\"z"}}
		ch, err := json.Marshal([]Change{Put(r)})
		if err != nil {
			t.Fatal(err)
		}
		line, err := journalLine{Serial: uint64(i), Lineage: lineage, Time: time.Unix(int64(i), 0).UTC(), Changes: ch}.encode()
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
	}
	return buf.Bytes()
}

// A crash can cut the journal at any byte: replay never fails, keeps every
// complete line, and reports the torn rest. A line cut just before its
// newline is whole: it is kept.
func TestReplayCutAtEveryByte(t *testing.T) {
	data := journal(t, 5)
	for k := 0; k <= len(data); k++ {
		cut := data[:k]
		complete := bytes.Count(cut, []byte("\n"))
		wantValid := bytes.LastIndexByte(cut, '\n') + 1
		if k < len(data) && data[k] == '\n' && k > wantValid {
			complete++
			wantValid = k
		}
		doc := NewDocument("app")
		var tornCalls int
		res, err := replay(doc, cut, func(int, int) { tornCalls++ })
		valid := res.valid
		if err != nil {
			t.Fatalf("cut at %d: %v", k, err)
		}
		if doc.Serial != uint64(complete) || len(doc.Resources) != complete {
			t.Fatalf("cut at %d: serial %d, %d resources; want %d", k, doc.Serial, len(doc.Resources), complete)
		}
		if valid != int64(wantValid) {
			t.Fatalf("cut at %d: valid prefix %d, want %d", k, valid, wantValid)
		}
		if torn := k > wantValid; torn != (tornCalls == 1) || tornCalls > 1 {
			t.Fatalf("cut at %d: torn reported %d times", k, tornCalls)
		}
	}
}

func FuzzReplay(f *testing.F) {
	f.Add(journal(f, 3))
	f.Add([]byte("{\"serial\":1}\n{"))
	f.Add([]byte("\n\n{\"serial\":1,\"lineage\":\"a\",\"changes\":[{\"put\":{\"name\":\"x\"}}]}\n"))
	f.Add([]byte("{\"serial\":1,\"lineage\":\"a\",\"changes\":[{}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc := NewDocument("app")
		res, err := replay(doc, data, func(int, int) {})
		if err != nil {
			return
		}
		valid := res.valid
		if valid < 0 || valid > int64(len(data)) {
			t.Fatalf("valid prefix %d of %d bytes", valid, len(data))
		}
		for name, r := range doc.Resources {
			if r == nil || name == "" {
				t.Fatalf("resource %q is %v", name, r)
			}
		}
		// What replay accepted replays the same from its valid prefix.
		again := NewDocument("app")
		if _, err := replay(again, data[:valid], func(int, int) { t.Fatalf("torn line inside the valid prefix") }); err != nil {
			t.Fatalf("valid prefix fails: %v", err)
		}
		if again.Serial != doc.Serial || len(again.Resources) != len(doc.Resources) {
			t.Fatalf("valid prefix replays to serial %d, %d resources; whole to %d, %d", again.Serial, len(again.Resources), doc.Serial, len(doc.Resources))
		}
	})
}
