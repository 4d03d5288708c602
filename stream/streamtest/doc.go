// Package streamtest provides a deterministic fake [stream.Source] for tests:
// an in-memory log of events and a script of faults to play against a
// [stream.Resumer] — failed opens, connections that end cleanly or break
// after k events, server-requested delays (Retry-After), expired cursors, an
// Open that blocks until cancelled, a Recv that blocks and ignores its
// context, the end of the stream. It records every Open (the cursor asked
// for, when, the step played, how many connections were still open) so that
// a test can assert on resumption, and counts open connections so that a
// test can assert none leaked.
//
// The cursor of the fake log is the sequence number of an event (1, 2, …);
// Open(after) delivers the events whose number is greater than after. Use
// [Extract] as the Resumer's extractor and a cursor.Store[int64].
//
// Rules of use:
//   - Each Open consumes one [Step] of the script, in order; once the script
//     has run out every connection delivers to the end of the log, where
//     [EndOfLog] decides what happens (by default the stream ends, so Run
//     returns nil once the whole log was handled).
//   - The Source has no clock and no randomness of its own: given the same
//     script, a Resumer meets the same faults at the same events. Draw a
//     random script with [RandomScript] from a seeded *rand.Rand and log the
//     seed, so that a failure can be replayed.
//   - Server delays are real: a DelayAfter step of one hour makes the
//     Resumer wait one hour. Use zero or tiny delays, or cancel.
//   - To cancel at the moment a Resumer is stuck (in a BlockOpen, a
//     BlockAfter, or waiting for events), wait with [Source.AwaitBlocked].
//
// A Source is safe for concurrent use. It starts no goroutines.
//
// The repository's own property tests (stream/property_test.go) show it at
// scale: 1,000 random faults over 100,000 events per seed.
package streamtest
