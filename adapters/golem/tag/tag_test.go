package tag

import (
	"testing"
	"time"
)

func TestTimeoutTags(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)
	tt := Timeout(at, "lineage-a", "op-1")
	if !tt.Truncate(time.Second).Equal(at.Truncate(time.Second)) {
		t.Fatalf("Timeout moved the second: %v", tt)
	}
	if !OfLineage(tt, "lineage-a") || OfLineage(tt, "lineage-b") {
		t.Errorf("lineage tags of %v", tt)
	}
	if !OfOperation(tt, "lineage-a", "op-1") || OfOperation(tt, "lineage-a", "op-2") {
		t.Errorf("operation tags of %v", tt)
	}
	// An extension keeps the tags.
	later := Retime(tt, at.Add(24*time.Hour+300*time.Millisecond))
	if !OfOperation(later, "lineage-a", "op-1") || later.Sub(tt) != 24*time.Hour {
		t.Errorf("Retime = %v (from %v)", later, tt)
	}
	// What clients set (to the second, millisecond or microsecond) carries no
	// tag; nor does a timeout without a lineage.
	for _, lineage := range []string{"lineage-a", "b", "c", "d", "e", "f", "g"} {
		for k := 0; k < 1000; k++ {
			for _, u := range []time.Time{at.Truncate(time.Second).Add(time.Duration(k) * time.Millisecond), at.Truncate(time.Second).Add(time.Duration(k*997) * time.Microsecond)} {
				if OfLineage(u, lineage) {
					t.Fatalf("%v is taken for %s's", u, lineage)
				}
			}
		}
	}
	if lt, _ := TimeoutTags(Timeout(at, "", "op-1")); lt != 0 {
		t.Errorf("a timeout without a lineage is tagged %d", lt)
	}
	// JSON round trip (RFC 3339 with nanoseconds) keeps the tags.
	b, _ := tt.MarshalJSON()
	var back time.Time
	if err := back.UnmarshalJSON(b); err != nil || !OfOperation(back, "lineage-a", "op-1") {
		t.Errorf("round trip %s: %v %v", b, back, err)
	}
}
