package service

import (
	"errors"
	"testing"

	"github.com/gcompose/gcompose/adapters/golem/yagna"
)

// A remove's log line says what it did: no activity when none had been
// made, an agreement cancelled when it was not approved yet.
func TestRemovalMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		st   yagna.AgreementState
		err  error
		r    removal
		want string
	}{
		{"cancelled before an activity", yagna.AgreementPending, nil, removal{Agreement: "ag1"},
			"service web: no activity had been created, agreement ag1 cancelled"},
		{"running", yagna.AgreementApproved, nil, removal{Activity: "act1", ActivityEnd: "destroyed", Agreement: "ag1"},
			"service web: activity act1 destroyed, agreement ag1 terminated"},
		{"already over", yagna.AgreementCancelled, nil, removal{Agreement: "ag1"},
			"service web: no activity had been created, agreement ag1 was already cancelled"},
		{"provider ended it", yagna.AgreementTerminated, nil, removal{Activity: "act1", ActivityEnd: "was already gone", Agreement: "ag1"},
			"service web: activity act1 was already gone, agreement ag1 was already terminated"},
		{"gone", "", &yagna.APIError{Status: 404}, removal{Agreement: "ag1"},
			"service web: no activity had been created, agreement ag1 was already gone"},
		{"unreadable", "", errors.New("connection refused"), removal{Agreement: "ag1"},
			"service web: no activity had been created, agreement ag1 ended"},
		{"nothing rented", "", nil, removal{},
			"service web: no activity had been created, no agreement had been made"},
	} {
		r := c.r
		if r.Agreement != "" {
			r.AgreementEnd = endingOf(c.st, c.err)
		}
		if got := r.message("web"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
