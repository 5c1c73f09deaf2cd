package source

import (
	"strings"
	"testing"
)

func TestEditDistance(t *testing.T) {
	for a, want := range map[[2]string]int{{"rnu", "run"}: 1, {"netwrok", "network"}: 1, {"", "abc"}: 3, {"kitten", "sitting"}: 3} {
		if got := EditDistance(a[0], a[1]); got != want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", a[0], a[1], got, want)
		}
	}
	long := strings.Repeat("x", 10_000)
	if got := EditDistance(long, "network"); got != 10_000 {
		t.Errorf("a name of 10,000 runes: distance %d, want its length without the quadratic table", got)
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"network", "payload", "depends_on"}
	for in, want := range map[string]string{
		"netwrok":   ` (did you mean "network"?)`,
		"payloads":  ` (did you mean "payload"?)`,
		"depends":   ` (did you mean "depends_on"?)`,
		"zzzzzzzzz": "",
		"ne":        "",
	} {
		if got := Suggest(in, known); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
