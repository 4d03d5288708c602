// Package errclass decides what a failure of a resumable stream means: retry
// it, give up, or resynchronise because the cursor has expired.
//
// A [Classifier] maps an error to a [Decision]: an [Action] and the least
// delay the server asked for. [Chain] composes classifiers: the first
// decision that is not [Unknown] wins. [Default] decides by this package's
// markers and retries every other error:
//   - [Permanent]: give up ([Fail]); so does an error whose method
//     Permanent() bool returns true, for packages that do not import errclass.
//   - [RetryAfter]: [Retry], waiting at least the given delay.
//   - [CursorExpired]: [Expired]; errors.Is(err, [ErrExpired]) reports true.
//
// Markers keep the error reachable through errors.Is and errors.As. When they
// nest or are joined, the first met in errors.Is order decides (the walk stops
// 100 levels deep, so a cyclic error cannot hang a stream).
//
// Classifiers must be safe for concurrent use and must not block. Every
// decision a stream takes, and FromHTTP's status table, are in
// docs/how-it-decides.md in the repository.
package errclass
