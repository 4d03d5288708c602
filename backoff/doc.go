// Package backoff says how long a resumable stream waits between attempts
// after a failure, over github.com/cenkalti/backoff/v4. Each stream gets its
// own fresh sequence, and no policy gives up on elapsed time unless told to.
//
// A [Policy] is a recipe, safe to share between any number of streams; a
// [Sequence] is one stream's state and belongs to one goroutine. Stock
// policies are [Default], [Exponential] with options and [Constant]; any
// other schedule is a Policy of your own.
//
// How a stream combines a step with the server's delay and the minimum
// restart delay is the delay rule of docs/how-it-decides.md in the
// repository.
package backoff
