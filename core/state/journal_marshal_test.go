package state

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// A line of changes is put together by hand (journalLine.marshal): its
// bytes, which the checksum covers, are json.Marshal's, whatever the
// strings hold.
func TestJournalLineMarshal(t *testing.T) {
	r := &Resource{Name: "files.f<1>", Status: StatusActive, Config: map[string]any{"s": "x\ny\"z & \u2028 é", "n": 1.5},
		Identity: map[string]any{"path": "/data/f"}, Pending: &Operation{ID: NewID(), Kind: OpCreate, Action: "create"}}
	ch, err := json.Marshal([]Change{Put(r), Delete("old")})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []journalLine{
		{Serial: 1, Lineage: NewID(), LockID: NewID(), Time: time.Now().UTC(), Changes: ch},
		{Serial: 18446744073709551615, Lineage: "", Time: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC), Changes: ch},
		{Serial: 7, Lineage: "a\"b<c>\\d\te", LockID: "lock é\u2029", Time: time.Unix(1, 5).In(time.FixedZone("x", 3600)), Changes: ch},
		{Serial: 8, Lineage: "plain-id_1.2:3", LockID: "x", Time: time.Now(), Changes: json.RawMessage(`[{"delete":"a"}]`)},
	} {
		got, err := e.marshal()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("line\n got %s\nwant %s", got, want)
		}
	}
	// A time JSON cannot hold fails as json.Marshal fails.
	if _, err := (journalLine{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Changes: ch}).marshal(); err == nil {
		t.Error("year 10000 encoded")
	}
}
