//go:build !unix

package project

// HoldReconcilerLock cannot lock without flock: two reconcilers on one
// file state repeat each other's refreshes (the state lock still keeps
// them from repairing one drift twice).
func HoldReconcilerLock(dir, app string) (release func(), err error) {
	return func() {}, nil
}
