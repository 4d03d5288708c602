// Package interop holds tests only: it runs the [sse.Source] of
// github.com/resumable-go/resumable/adapters/sse against the servers of SSE
// libraries we did not write, and benchmarks it beside their clients. It is
// a module of its own so that the root module gains no dependency.
//
// [sse.Source]: https://pkg.go.dev/github.com/resumable-go/resumable/adapters/sse#Source
package interop
