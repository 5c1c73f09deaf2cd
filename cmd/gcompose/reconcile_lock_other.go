//go:build !unix

package main

// holdReconcilerLock cannot lock without flock: two reconcilers on one
// file state repeat each other's refreshes (the state lock still keeps
// them from repairing one drift twice).
func holdReconcilerLock(dir, app string) (release func(), err error) {
	return func() {}, nil
}
