package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// exampleClient returns a client of a running etcd: here the single member
// that the test binary starts in-process (no network beyond loopback).
func exampleClient() *clientv3.Client {
	c, err := server.Client()
	if err != nil {
		panic(err)
	}
	return c
}

// A Resumer over the keys under a prefix: a transaction's events come one by
// one, each with its own cursor, so a stream stopped in the middle of the
// transaction resumes with the next event.
func ExampleNewResumer() {
	client := exampleClient()
	defer client.Close()
	ctx := context.Background()

	before, _ := etcd.Now(ctx, client)
	client.Put(ctx, "/example/resumer/a", "1")
	client.Txn(ctx).Then(
		clientv3.OpPut("/example/resumer/b", "2"),
		clientv3.OpDelete("/example/resumer/a"),
	).Commit()

	store := cursor.NewMemory(before) // or etcd.NewStore, to survive restarts
	r, err := etcd.NewResumer(client, "/example/resumer/", store)
	if err != nil {
		fmt.Println(err)
		return
	}
	n := 0
	err = r.Run(ctx, func(_ context.Context, ev etcd.Event) error {
		fmt.Printf("%v %s, event %d of its revision\n", ev.Type, ev.Key, ev.Cursor.Index)
		if n++; n == 3 {
			return stream.ErrStop // commit this one and return
		}
		return nil
	})
	fmt.Println("Run:", err)
	// Output:
	// PUT /example/resumer/a, event 1 of its revision
	// PUT /example/resumer/b, event 1 of its revision
	// DELETE /example/resumer/a, event 2 of its revision
	// Run: <nil>
}

// Every process calls Group.Run with the streams it offers; each stream runs
// in one process at a time, with its cursor in etcd, every Save fenced by
// the ownership and every event guarded by the lease. The owner hook
// reports each ownership as it starts and ends.
func ExampleGroup() {
	client := exampleClient()
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start, _ := etcd.Now(ctx, client) // a new stream starts at the current revision
	g, err := etcd.NewGroup(client, "worker-1", etcd.WithKeyPrefix("/example/group/"),
		etcd.WithOwnerHook(func(e etcd.OwnerEvent) {
			switch {
			case e.Owned:
				fmt.Println(e.Member, "owns", e.Stream)
			case e.Err != nil:
				fmt.Println(e.Member, "lost", e.Stream+":", e.Err)
			default:
				fmt.Println(e.Member, "handed", e.Stream, "off")
			}
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	var (
		mu      sync.Mutex
		handled []string
	)
	err = g.Run(ctx, []string{"orders"}, func(ctx context.Context, o *etcd.Owner) error {
		store, err := etcd.NewOwnerStore(o, etcd.CursorCodec(), start)
		if err != nil {
			return err
		}
		r, err := etcd.NewResumer(client, "/example/streams/"+o.Stream()+"/", store)
		if err != nil {
			return err
		}
		fmt.Println("owner of", o.Stream())
		client.Put(ctx, "/example/streams/orders/1", "an order")
		return r.Run(ctx, etcd.Guard(o, func(_ context.Context, ev etcd.Event) error {
			mu.Lock()
			handled = append(handled, string(ev.Key))
			mu.Unlock()
			cancel() // stop the group: final save, then the lease is revoked
			return nil
		}))
	})
	fmt.Println("Run:", err)
	fmt.Println("handled:", strings.Join(handled, ", "))
	saved, _ := client.Get(context.Background(), "/example/group/cursors/orders")
	fmt.Println("cursor saved:", len(saved.Kvs) == 1)
	// Output:
	// worker-1 owns orders
	// owner of orders
	// worker-1 handed orders off
	// Run: context canceled
	// handled: /example/streams/orders/1
	// cursor saved: true
}

// A fenced Store refuses to write once its condition fails, whoever wrote
// the key since.
func ExampleWithFence() {
	client := exampleClient()
	defer client.Close()
	ctx := context.Background()

	resp, _ := client.Put(ctx, "/example/fence/owner", "me")
	fence := clientv3.Compare(clientv3.CreateRevision("/example/fence/owner"), "=", resp.Header.Revision)
	store, _ := etcd.NewStore(client, "/example/fence/cursor", etcd.CursorCodec(), etcd.Cursor{}, etcd.WithFence(fence))
	store.Load(ctx)

	fmt.Println(store.Save(ctx, etcd.Cursor{Revision: 10}))
	client.Delete(ctx, "/example/fence/owner") // the lease behind it expired, say
	err := store.Save(ctx, etcd.Cursor{Revision: 11})
	fmt.Println(errors.Is(err, etcd.ErrNotOwner))
	// Output:
	// <nil>
	// true
}

// A Cursor prints as the position it names: a whole revision, or an event
// within one.
func ExampleCursor() {
	fmt.Println(etcd.Cursor{Revision: 12})
	fmt.Println(etcd.Cursor{Revision: 12, Index: 2})
	// Output:
	// revision 12
	// revision 12 event 2
}
