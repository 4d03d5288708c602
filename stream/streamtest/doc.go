// Package streamtest provides a deterministic fake [stream.Source] for tests:
// an in-memory log of events and a script of faults to play against a
// [stream.Resumer] (failed opens, clean ends, breaks, server delays, expired
// cursors, blocked calls, the end of the stream). It records every Open so
// that a test can assert on resumption, and counts live connections so that
// a test can assert none leaked.
//
// An event's cursor is its sequence number (1, 2, …); Open(after) delivers
// the events numbered above after. Use [Extract] as the Resumer's extractor
// and a cursor.Store[int64].
//
// Rules of use:
//   - Each Open consumes one [Step] of the script, in order; once it has run
//     out every connection delivers to the end of the log, where [EndOfLog]
//     decides (by default the stream ends, so Run returns nil).
//   - The Source has no clock and no randomness of its own: given the same
//     script, a Resumer meets the same faults at the same events. Draw a
//     random script with [RandomScript] from a seeded *rand.Rand and log the
//     seed, so that a failure can be replayed.
//   - Server delays are real: a DelayAfter step of one hour waits one hour.
//   - To cancel at the moment a Resumer is stuck, wait with
//     [Source.AwaitBlocked].
//
// A Source is safe for concurrent use. It starts no goroutines.
package streamtest
