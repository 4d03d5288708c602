// Package redis reads Redis Streams as a stream.Source, over go-redis v9:
// a single reader with the entry ID as cursor, or a consumer of a consumer
// group that never loses an entry and never silently starts over.
//
// A [Source] reads with XREAD after the cursor kept in any cursor.Store (a
// file, etcd's fenced store, PostgreSQL with Transactional); run it with
// [NewResumer]. A [Group] reads with XREADGROUP as one named consumer; run
// it with [NewGroupResumer] and a handler wrapped by [Group.Handler].
// A [Store] keeps any stream's cursor in a Redis hash, and [Transactional]
// (or [TransactionalBatch]) writes it in the same MULTI/EXEC as the
// handler's commands: exactly once into Redis, from any source.
//
// Rules of use:
//   - In group mode the group is the Store: an entry is acknowledged
//     (XACK) only once the stream committed it — under
//     stream.WithConcurrency, the contiguous prefix of handled entries.
//     A crash redelivers at most what was read and not yet acknowledged.
//   - After a start, a consumer gets its own pending entries first, then
//     those idle for longer than [WithClaimIdle] in other consumers'
//     lists, then new ones. Give each process a fixed consumer name: on a
//     *Client, a second live process with the same name is refused at
//     Open ([ErrConsumerInUse]).
//   - An entry whose handler calls failed [WithMaxDeliveries] times (calls
//     in a process that died included; reads never count; failures marked
//     errclass.RetryAfter never count) is parked (stream.WithDeadLetter)
//     and then acknowledged; without a dead letter Run ends and the entry
//     stays pending. Never dropped without a record.
//   - A stream or group that disappeared or was recreated (a restart
//     without persistence, FLUSHALL, DEL, XGROUP DESTROY) is
//     stream.ErrSourceChanged; a group is created only by the first Open
//     of a Group's life. Entries removed (XTRIM, MAXLEN) before they were
//     read or acknowledged are errclass.Expired, for a resync hook.
//   - WRONGTYPE, NOPERM, authentication and syntax errors are
//     errclass.Permanent; connection errors and LOADING, BUSY, TRYAGAIN and
//     the like are retried by the stream's loop; MOVED and ASK are
//     go-redis's (use a ClusterClient). The package retries nothing itself.
//   - A blocking read lasts at most [WithBlock]. On a *Client each
//     connection of a Source or a Group reads through a small client of
//     its own (the lane: the client's options, at most two connections,
//     none taken from the client's pool), whose sockets the end of the
//     read's context or the connection's Close closes: a stop is prompt
//     even when the server answers nothing. On a ClusterClient or a Ring,
//     reads end within the block time and the read timeout.
//   - A [Store] has one owner: its Load takes the key over, and a
//     predecessor's later Saves and transactions write nothing and fail
//     with [ErrCursorChanged] (Permanent). A Transactional handler's
//     commands only queue; Redis has no rollback, so a command failing
//     inside EXEC leaves the others and the cursor written (its error is
//     Permanent). Keys of one transaction share a hash slot on a cluster.
//
// docs/redis.md in the repository has what is acknowledged when, claims,
// poison entries, and what a lost or trimmed stream looks like.
package redis
