package plan

import (
	"errors"
	"fmt"
	"testing"
)

// An error whose text merely begins with the resource's name ("web server
// ...") is not one that names the resource: it is still named.
func TestNamedByTypeNotByText(t *testing.T) {
	err := Named("web", errors.New("web server unreachable"))
	if got, want := err.Error(), "web: web server unreachable"; got != want {
		t.Fatalf("Named: %q, want %q", got, want)
	}
}

func TestResourceErrorNamesTheResourceOnce(t *testing.T) {
	inner := errors.New("state call: quota exceeded")
	err := Named("resources.c", inner)
	var re *ResourceError
	if !errors.As(err, &re) || re.Address != "resources.c" || !errors.Is(err, inner) {
		t.Fatalf("Named: %#v, want a *ResourceError of resources.c wrapping the error", err)
	}
	if again := Named("resources.c", err); again != err {
		t.Fatalf("Named twice: %q, want the first one", again)
	}
	if got, want := Named("resources.d", err).Error(), "resources.d: resources.c: state call: quota exceeded"; got != want {
		t.Fatalf("another resource's error: %q, want %q", got, want)
	}
	refused := &RefusedError{Resource: "resources.c", Type: "img", Message: "no"}
	if Named("resources.c", refused) != error(refused) {
		t.Fatal("a refusal names its resource already: Named must keep it")
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{err, "state call: quota exceeded"},
		{refused, "refused by its adapter img: no"},
		{inner, "state call: quota exceeded"},
		{fmt.Errorf("wrapped: %w", err), "wrapped: resources.c: state call: quota exceeded"},
	} {
		if got := Reason("resources.c", c.err); got != c.want {
			t.Errorf("Reason(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
