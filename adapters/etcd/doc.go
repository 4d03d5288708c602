// Package etcd is resumable's adapter for etcd: a [stream.Source] over a
// watch of a key prefix, a [cursor.Store] that keeps a cursor in an etcd
// key, and a [Group] that runs named streams across processes, one owner
// per stream, with an etcd lease, a lease-bound owner key per stream and
// fenced writes. It is the only place the module imports etcd
// (go.etcd.io/etcd/client/v3 v3.7).
//
// # Watching a prefix
//
// [NewResumer] builds a [stream.Resumer] over the keys under a prefix: the
// watch, the cursor of an [Event], what an etcd failure means and what to do
// when the cursor was compacted away:
//
//	r, err := etcd.NewResumer(client, "/orders/", store)
//	err = r.Run(ctx, func(ctx context.Context, ev etcd.Event) error { … })
//
// Rules of use:
//   - A [Cursor] is a revision and, within it, how many of its events under
//     the prefix were handled. All events of one transaction share a
//     revision; counting them makes a stream that stopped in the middle of a
//     transaction (a handler error, a stop, a failed Save, a handoff) resume
//     with the next of its events: nothing lost, nothing repeated. etcd
//     delivers a revision's events in the order of the transaction's
//     operations every time they are watched, which is what makes the count
//     a position.
//   - The zero Cursor resumes from revision 1: every change etcd still has,
//     or a resync once history was compacted. [Now] is the cursor of the
//     current revision.
//   - Progress notifications (the server's, every
//     --watch-progress-notify-interval, 10 minutes by default) become
//     events committed but never handled: a quiet prefix's cursor
//     keeps up with the revision, and is less likely to be compacted away.
//   - Watches require a leader: a member cut off from its cluster cancels
//     the watch, and the reopen goes to a member that has one.
//   - A compacted cursor is [errclass.Expired]. With the resync
//     NewResumer installs, the stream reads the prefix at the current
//     revision, in pages, and delivers it between a ResyncStart and a
//     ResyncEnd marker, then continues after that revision. Deletions in
//     the gap are not replayed: drop what the replay lacked.
//   - Event.Key and Event.Value share memory with the watch response: copy
//     them to keep them.
//   - A [Cursor] records the cluster it was read from: another cluster, or
//     one wiped or restored below the cursor, is [stream.ErrSourceChanged],
//     which [NewResumer]'s resync handles (docs/replaced-backend.md).
//
// # Keeping the cursor in etcd
//
// [NewStore] keeps a cursor at one key through a [cursor.Codec]
// (cursor.JSON[Cursor]() for a Cursor). Its Save is a compare-and-set: it writes
// only if the key was not written since the Store read or wrote it
// ([ErrCursorChanged] otherwise), and only if every condition given with
// [WithFence] holds ([ErrNotOwner] otherwise); both errors are
// [errclass.Permanent], so the stream stops instead of retrying.
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
// The members register under the group's prefix with their lease. A free
// stream is taken by the member that rendezvous hashing picks among the
// live members offering it, with a transaction that creates the stream's
// owner key under its lease only if the key does not exist. Rules of use:
//   - At most one member owns a stream at a time: the owner key exists once,
//     and goes with its owner's lease.
//   - Fenced writes: [NewOwnerStore]'s Save is a transaction conditioned on
//     the owner key's create revision ([Owner.Fence]). Once the key is gone
//     (the lease expired, the stream was handed off), no Save of the former
//     owner lands, and the stored cursor never goes back.
//   - Guarded handling: [Guard] checks before each event that the member's
//     lease cannot have expired by the process's own clock. A member paused
//     or cut off past its lease handles nothing more when it resumes, except
//     the one event per stream whose check had passed before the pause.
//   - Graceful handoff: when [Group.Run]'s context ends, or a stream must
//     move to a member that joined, the run's context is cancelled, the
//     Resumer saves its cursor, and the member deletes its owner key (or
//     revokes its lease): the successor starts at once, where the owner
//     stopped, without redelivery.
//   - Crash: a member that dies keeps its streams until its lease expires
//     (the TTL); its successor then redelivers what was handled since the
//     last checkpoint — at most the checkpoint cadence
//     ([stream.WithCheckpointEvery], [stream.WithCheckpointInterval]).
//   - Delivery is at-least-once. Exactly-once effects need the handler's
//     writes to carry the fence too (put them in a transaction with
//     [Owner.Fence], or make them idempotent).
//   - [WithOwnerHook] reports each ownership as it starts and ends (handed
//     off, or lost).
//   - The etcd client logs to stderr, noisily at shutdown, unless its
//     clientv3.Config.Logger is set (zap.NewNop() to silence it).
//
// No goroutine a Group starts outlives [Group.Run]. The etcd client's own
// goroutines (keep-alives, watches) belong to the client and end when it is
// closed.
package etcd
