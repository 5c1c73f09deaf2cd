package plan

import (
	"strings"
)

// ResourceError is an error of one resource. The address is said once,
// here, when the error is formatted: the layers below say what failed
// without naming the resource, and the edges that show the address on
// their own (a plan line, an apply summary) print Reason beside it.
type ResourceError struct {
	Address string
	Err     error
}

func (e *ResourceError) Error() string { return e.Address + ": " + e.Reason() }

// Reason is the error without the address.
func (e *ResourceError) Reason() string { return Reason(e.Address, e.Err) }

func (e *ResourceError) Unwrap() error { return e.Err }

// ResourceAddress is the resource the error is about.
func (e *ResourceError) ResourceAddress() string { return e.Address }

// Addressed is an error that names its resource itself (an adapter's
// answer or config error, a refusal): its Error is the address, ": ", and
// its Reason. ResourceError is one.
type Addressed interface {
	error
	ResourceAddress() string
	Reason() string
}

// Named is err as an error of the resource at address: err itself when it
// names that resource already, so that messages name it exactly once.
func Named(address string, err error) error {
	if err == nil {
		return nil
	}
	if a, ok := err.(Addressed); ok && a.ResourceAddress() == address {
		return err
	}
	return &ResourceError{Address: address, Err: err}
}

// ErrorReason is why the step could not be planned, without its address: its
// error's Reason, or, for a plan read from a file (which keeps the error's
// text only), that text less the address it starts with.
func (s *Step) ErrorReason() string {
	if s.Err != nil {
		return Reason(s.Resource, s.Err)
	}
	return strings.TrimPrefix(s.Error, s.Resource+": ")
}

// Reason is err's message without the address when err is an error of
// that resource (Addressed), else its whole message.
func Reason(address string, err error) string {
	if a, ok := err.(Addressed); ok && a.ResourceAddress() == address {
		return a.Reason()
	}
	return err.Error()
}
