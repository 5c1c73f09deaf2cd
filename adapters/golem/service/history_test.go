package service

import (
	"slices"
	"testing"
)

func TestHistoryOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     Identity
		strays []tagged
		want   []string
	}{
		{"nothing rented yet", Identity{}, nil, nil},
		{"a state from before the history: its current agreement", Identity{AgreementID: "a1"}, nil, []string{"a1"}},
		{"the history and the current agreement, once", Identity{AgreementID: "a2", Agreements: []string{"a1", "a2"}}, nil, []string{"a1", "a2"}},
		{"after a delete: the history alone", Identity{Agreements: []string{"a1", "a2"}}, nil, []string{"a1", "a2"}},
		{"a stray agreement is added, a stray demand is not", Identity{AgreementID: "a1", Agreements: []string{"a1"}},
			[]tagged{{Kind: "demand", ID: "d1"}, {Kind: "agreement", ID: "a3"}}, []string{"a1", "a3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.id.Agreements)
			if got := historyOf(tc.id, tc.strays); !slices.Equal(got, tc.want) {
				t.Fatalf("historyOf = %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.id.Agreements, before) {
				t.Fatalf("historyOf changed the identity's history: %v", tc.id.Agreements)
			}
		})
	}
}
