package cdc_test

import (
	"context"
	"fmt"
	"log"

	"github.com/resumable-go/resumable/adapters/postgres/cdc"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// A cursor is a position inside a commit: every change of a transaction
// shares its commit LSN, and the index says how far into it the stream got.
func ExampleCompare() {
	third := cdc.Cursor{LSN: 0x16B3748, Index: 2}  // after the 3rd change of the transaction committed at 0/16B3748
	fourth := cdc.Cursor{LSN: 0x16B3748, Index: 3} // after its 4th
	before := cdc.Cursor{LSN: 0x16B3748, Index: -1}
	fmt.Println(third, cdc.Compare(third, fourth), cdc.Compare(before, third))
	// Output: 0/16B3748 #2 -1 -1
}

// Consume a publication, keeping the cursor in a file. The Store given to
// NewResumer is wrapped so that the server is told only what the file
// holds.
func ExampleNewResumer() {
	ctx := context.Background()
	src, err := cdc.NewSource("postgres://app@db.internal/shop", "shop_cdc", "shop_pub")
	if err != nil {
		log.Fatal(err)
	}
	store, err := cursor.NewFile("/var/lib/shop-cdc/cursor.json", cdc.Cursor{}, cursor.JSON[cdc.Cursor]())
	if err != nil {
		log.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store,
		stream.WithResync(cdc.Resync(src, 0))) // or leave it out to stop on a replaced slot or server
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, func(ctx context.Context, ev cdc.Event) error {
		id, _ := ev.New.Get("id")
		fmt.Println(ev.Relation, ev.Op, string(id), ev.LSN, ev.Index)
		return nil
	})
	log.Fatal(err)
}

// Adopt CDC on a live database: the first start delivers the rows that
// exist, then the changes; a table added to the publication later is
// backfilled while the stream runs. The consumer applies snapshot rows,
// inserts and updates as upserts (here as JSON with typed values) and
// knows where each source transaction ends.
func ExampleWithSnapshot() {
	ctx := context.Background()
	src, err := cdc.NewSource("postgres://app@db.internal/shop", "shop_cdc", "shop_pub",
		cdc.WithSnapshot(0), cdc.WithMessages("outbox"))
	if err != nil {
		log.Fatal(err)
	}
	if err := src.Backfill(ctx, "public.refunds"); err != nil { // just added to shop_pub
		log.Fatal(err)
	}
	store, err := cursor.NewFile("/var/lib/shop-cdc/cursor.json", cdc.Cursor{}, cursor.JSON[cdc.Cursor]())
	if err != nil {
		log.Fatal(err)
	}
	r, err := cdc.NewResumer(src, store)
	if err != nil {
		log.Fatal(err)
	}
	err = r.Run(ctx, func(ctx context.Context, ev cdc.Event) error {
		switch ev.Op {
		case cdc.Snapshot, cdc.Insert, cdc.Update:
			row, err := ev.New.MarshalJSON()
			if err != nil {
				return err
			}
			fmt.Printf("upsert %s %s\n", ev.Relation, row)
		case cdc.Delete:
			key, _ := ev.Old.MarshalJSON()
			fmt.Printf("delete %s %s\n", ev.Relation, key)
		case cdc.Message:
			fmt.Printf("outbox %s at %v\n", ev.Content, ev.CommitTime)
		}
		if ev.TxEnd {
			fmt.Println("commit") // the end of a source transaction
		}
		return nil
	})
	log.Fatal(err)
}
