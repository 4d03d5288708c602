// Package backoff says how long a resumable stream waits between attempts
// after a failure. It builds on github.com/cenkalti/backoff/v4 for the delay
// sequences and adds what a long-lived stream needs: every stream gets its own
// fresh sequence from a [Policy] (cenkalti's ExponentialBackOff is not safe for
// concurrent use), and no policy gives up on elapsed time unless told to.
//
// A [Policy] is a recipe and is safe to share between any number of streams;
// a [Sequence] is one stream's state and belongs to one goroutine.
//
// Stock policies: [Default], [Exponential] with options and [Constant]
// (Constant(0) with a minimum restart delay is client-go's RetryWatcher);
// any other schedule is a [Policy] of your own.
//
// How a stream combines a step with the server's delay and the minimum
// restart delay is the delay rule of docs/how-it-decides.md in the
// repository; examples/quickstart prints each wait and which term set it.
package backoff
