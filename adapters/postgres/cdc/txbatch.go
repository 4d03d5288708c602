package cdc

import "github.com/resumable-go/resumable/stream"

// WithTxBatches makes [stream.Resumer.RunBatch] end batches only at the
// end of a source transaction ([Event.TxEnd]): a batch holds whole source
// transactions — as many as were read already and fit in the batch's max
// ([stream.WithBatch]) — or a part of one larger than max. With
// postgres.TransactionalBatch, a target then never shows part of a source
// transaction that fits in a batch, and small transactions share a target
// commit (docs/postgres.md).
func WithTxBatches() stream.Option {
	return stream.WithBatchEnd(func(ev Event) bool { return ev.TxEnd })
}
