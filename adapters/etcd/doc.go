// Package etcd is resumable's adapter for etcd (go.etcd.io/etcd/client/v3
// v3.7): a [stream.Source] over a watch of a key prefix, a [cursor.Store]
// that keeps a cursor in an etcd key, and a [Group] that runs named streams
// across processes, one owner per stream, with an etcd lease, a lease-bound
// owner key per stream and fenced writes.
//
// # Watching a prefix
//
//	r, err := etcd.NewResumer(client, "/orders/", store)
//	err = r.Run(ctx, func(ctx context.Context, ev etcd.Event) error { … })
//
// [NewResumer] wires [NewSource], the extractor [Extract], the cursor order
// [Compare] and a resync; use the parts for a Resumer of your own. Errors
// are marked where they arise (see [NewSource]); every constructor and
// option reports a bad argument with an error matching
// [stream.ErrInvalidOption] that names it, all at once.
//
// A [Cursor] is a revision and how many of its events were handled, so a
// stream stopped inside a transaction resumes with its next event. The zero
// Cursor resumes from revision 1; [Now] is the current revision's. A
// compacted cursor, or one of another cluster ([stream.ErrSourceChanged]),
// resyncs: the prefix at the current revision between a ResyncStart and a
// ResyncEnd marker (deletions in the gap are not replayed). Event.Key and
// Event.Value share memory with the watch response: copy them to keep them.
//
// # Keeping the cursor in etcd
//
// [NewStore] keeps a cursor at one key. Its Save is a compare-and-set
// ([ErrCursorChanged]) optionally fenced by [WithFence] ([ErrNotOwner]);
// both errors are [errclass.Permanent].
//
// # Many streams, many processes
//
// Every process makes a [Group] with a unique member name and calls
// [Group.Run] with the streams it offers and a [RunFunc] that runs one:
//
//	g, err := etcd.NewGroup(client, "worker-1", etcd.WithTTL(10*time.Second))
//	err = g.Run(ctx, []string{"orders", "payments"}, func(ctx context.Context, o *etcd.Owner) error {
//		store, err := etcd.NewOwnerStore(o, cursor.JSON[etcd.Cursor](), etcd.Cursor{})
//		if err != nil {
//			return err
//		}
//		r, err := etcd.NewResumer(client, "/streams/"+o.Stream()+"/", store)
//		if err != nil {
//			return err
//		}
//		return r.Run(ctx, etcd.Guard(o, handle))
//	})
//
// Guarantees:
//   - At most one member owns a stream at a time: its owner key, created
//     only where none exists, goes with its owner's lease.
//   - Fenced writes: [NewOwnerStore]'s Save is conditioned on the owner key
//     ([Owner.Fence]); once the key is gone no Save of the former owner
//     lands, and the stored cursor never goes back.
//   - Guarded handling: [Guard] hands an event over only while the lease
//     cannot have expired by the process's own clock; a member paused past
//     its lease handles at most the one event per stream whose check had
//     passed before the pause.
//   - Graceful handoff: on a stop or a move, the run saves its cursor and
//     the member gives the owner key up: the successor starts at once,
//     without redelivery.
//   - Crash: a dead member's streams wait for its lease (the TTL); the
//     successor redelivers what was handled since the last checkpoint.
//   - Delivery is at-least-once; for exactly-once effects put the handler's
//     writes in a transaction with [Owner.Fence], or make them idempotent.
//
// No goroutine a Group starts outlives [Group.Run]. The etcd client logs
// to stderr unless clientv3.Config.Logger is set (zap.NewNop() to
// silence it). The design and its limits: docs/etcd.md in the repository.
package etcd
