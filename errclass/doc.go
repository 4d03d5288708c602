// Package errclass decides what a failure of a resumable stream means: retry
// it, give up, or resynchronise because the cursor has expired.
//
// A [Classifier] maps an error to a [Decision]: an [Action] and the least
// delay the server asked for. Classifiers compose with [Chain], where the
// first decision that is not [Unknown] wins. [Default] reads the markers this
// package puts on errors and retries everything else — the philosophy of
// client-go's RetryWatcher: proceed unless certain it can't.
//
// Markers wrap an error and keep it reachable through errors.Is and errors.As:
//   - [Permanent]: give up ([Fail]).
//   - [RetryAfter]: retry, but not before the given delay ([Retry] with After).
//   - [CursorExpired]: the cursor is too old to resume from ([Expired]);
//     errors.Is(err, [ErrExpired]) reports true.
//
// When markers nest or are joined, the first one met in errors.Is order
// decides; the walk stops 100 levels deep, so a cyclic error cannot hang a
// stream. An error with a method Permanent() bool returning true counts as
// marked [Permanent], so packages need not import errclass to say "do not
// retry this".
//
// Classifiers must be safe for concurrent use and must not block: the stream
// calls them on its own goroutine for every failure.
//
// A classifier built from these pieces plus a rule of its own, for an HTTP
// API that answers 401, 410, 429 and 5xx, is the program examples/classifier
// in the repository; examples/sse marks its errors for [Default].
package errclass
