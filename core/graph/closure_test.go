package graph

import (
	"reflect"
	"testing"
)

func TestDescendantsAndReach(t *testing.T) {
	// db <- api <- web, db <- worker; cache alone; api also needs ext (not a key).
	deps := map[string][]string{
		"db": nil, "api": {"db", "ext"}, "web": {"api"}, "worker": {"db"}, "cache": nil,
	}
	if got, want := Descendants(deps, []string{"api"}), map[string]bool{"api": true, "web": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Descendants(api) = %v, want %v", got, want)
	}
	if got, want := Descendants(deps, []string{"db", "db"}), map[string]bool{"db": true, "api": true, "web": true, "worker": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Descendants(db) = %v, want %v", got, want)
	}
	if got, want := Reach(deps, []string{"web"}), map[string]bool{"web": true, "api": true, "db": true, "ext": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("Reach(web) = %v, want %v", got, want)
	}
	if got := Descendants(deps, nil); len(got) != 0 {
		t.Errorf("Descendants(nothing) = %v, want nothing", got)
	}
}
