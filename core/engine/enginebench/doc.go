// Package enginebench measures and tests the engine end to end with real
// containers of the repo's file adapter (cmd/file-adapter), as issue 5
// asks: re-deploy of 1,000 unchanged resources served, one-shot and
// Deployster-like; fresh deploy of 200 resources whose actions take 50 ms
// against the ideal and against the adapter alone (issue 17); the exact number of calls per resource of a deploy and
// a re-deploy; and a served container killed during a deploy. It holds only
// tests and benchmarks (go test -bench . ./core/engine/enginebench); the
// figures and how to read them are in docs/performance.md.
package enginebench
