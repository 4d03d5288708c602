// Package kafka consumes Kafka topics as one member of a consumer group,
// over franz-go: each partition assigned to the member is a stream whose
// cursor is the record's offset, its records handled in parallel by key,
// its offsets committed only below the oldest unfinished record.
//
// Make a [Group] with [NewGroup] and call [Group.Run] with a handler and
// the stream's options (stream.WithConcurrency, stream.WithHandlerRetry,
// stream.WithDeadLetter with [DeadLetter]), or [Group.RunBatch] with a
// handler of a partition's consecutive records.
//
// Rules of use:
//   - The group's committed offsets are the Store. A partition's commit is
//     the end of its contiguous prefix of handled (or parked) records,
//     never beyond an unfinished one: at-least-once, never a skip. A commit
//     goes out as soon as a prefix moved, one at a time, at most one per
//     [WithCommitInterval], and when a partition is released.
//   - With [WithStore] a Store of the caller's holds each partition's
//     cursor, loaded at assignment and winning over the group's offset;
//     with postgres.Transactional a record's effects and its offset commit
//     together (exactly once), one record of a partition at a time.
//   - Records of one key ([Key], the default order key) go to the handler
//     one at a time, in offset order; other keys overlap up to the
//     concurrency. A partition whose fetched records fill
//     [WithFetchBuffer] stops fetching until its stream reads half of them.
//   - A revoked partition stops reading at once, lets its records in
//     flight finish (at most [WithDrainTimeout], then their context is
//     cancelled), commits, and only then is released to its next owner. A
//     lost partition (the member's session expired) stops at once and
//     commits nothing more; what it handled and did not commit is counted
//     in [Stats].Uncommitted and handled again by the next owner.
//   - A parked record ([DeadLetter]) is committed past only after the
//     broker acknowledged it in the dead-letter topic.
//   - Offsets out of range (a committed offset deleted by retention) are
//     errclass.Expired; records lost by the broker or a topic deleted and
//     recreated are stream.ErrSourceChanged. Both end Run: the member
//     never resets an offset silently (kgo.NoResetOffset unless
//     [WithClientOptions] says otherwise).
//   - Every goroutine Run starts ends before it returns.
//
// docs/kafka.md in the repository has the long form and measurements.
package kafka
