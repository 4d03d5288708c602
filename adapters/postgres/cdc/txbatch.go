package cdc

import "github.com/resumable-go/resumable/stream"

// WithTxBatches makes [stream.Resumer.RunBatch] end a batch at the end of
// every source transaction ([Event.TxEnd]): a batch is then one source
// transaction, or a part of one larger than the batch's max
// ([stream.WithBatch]). With postgres.TransactionalBatch, a target then
// never shows part of a source transaction that fits in a batch. A batch
// holds one source transaction at most, so small transactions are
// committed to a target one by one (docs/postgres.md).
func WithTxBatches() stream.Option {
	return stream.WithBatchEnd(func(ev Event) bool { return ev.TxEnd })
}
