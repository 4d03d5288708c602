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
