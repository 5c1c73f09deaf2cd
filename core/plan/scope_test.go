package plan

import (
	"strings"
	"testing"
)

// An address that matches nothing gets advice in the form it was typed:
// a bare name a bare name, a sectioned address a sectioned one.
func TestSuggestAddress(t *testing.T) {
	names := []string{"networks.default", "resources.golem-payments", "services.db-service", "services.web-service[0]", "services.web-service[1]"}
	for addr, want := range map[string]string{
		"web-servce":          ` (did you mean "web-service"?)`,
		"services.web-servce": ` (did you mean "services.web-service"?)`,
		"defualt":             ` (did you mean "default"?)`,
		"cache":               "",
	} {
		if got := SuggestAddress(addr, names); got != want {
			t.Errorf("SuggestAddress(%q) = %q, want %q", addr, got, want)
		}
	}
	if _, err := matchAll("--target", []string{"db-servic"}, names); err == nil || !strings.Contains(err.Error(), `--target db-servic matches no resource of the application (did you mean "db-service"?)`) {
		t.Errorf("matchAll of a typo: %v", err)
	}
}
