package redis

import (
	"context"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/resumable-go/resumable/internal/testkit/redistest"
)

// TestBlockerRunCutsBeforeItReturns: when ctx ends during a command run
// on the lane, run returns only once the lane's sockets are closed, so
// that the close cuts no socket of a command after it (a Group's Close
// acknowledges through the lane right after its last read). Before, the
// close ran on context.AfterFunc's goroutine, whenever it got there.
func TestBlockerRunCutsBeforeItReturns(t *testing.T) {
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer rdb.Close()
	b := newBlocker(rdb)
	defer b.close()
	for i := range 200 {
		ctx, cancel := context.WithCancel(t.Context())
		b.run(ctx, func(ctx context.Context) error {
			err := b.via().Ping(ctx).Err()
			cancel() // ends ctx after the command, before run returns
			return err
		})
		b.mu.Lock()
		open := len(b.socks)
		b.mu.Unlock()
		if open != 0 {
			t.Fatalf("run %d returned with %d lane sockets open after its context ended", i, open)
		}
	}
}
