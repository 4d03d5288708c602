package redis

import (
	"context"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// blocker runs a connection's blocking reads (XREAD and XREADGROUP with
// BLOCK) so that the end of their context, or the connection's Close, ends
// them at once instead of when the block time runs out. On a *Client they
// run on a Redis connection of their own, which CLIENT UNBLOCK names by its
// ID; on a ClusterClient or a Ring they run as any command does, and end
// within the block time.
type blocker struct {
	rdb goredis.UniversalClient
	cl  *goredis.Client // rdb, when it is one; nil otherwise

	mu      sync.Mutex
	conn    *goredis.Conn // the reads' connection; nil before the first
	id      int64         // conn's client ID; 0: not known yet
	ended   chan struct{} // closed when the read in flight returns; nil: none in flight
	closed  bool          // conn goes when the read in flight returns
	unblock sync.WaitGroup
}

func newBlocker(rdb goredis.UniversalClient) *blocker {
	cl, _ := rdb.(*goredis.Client)
	return &blocker{rdb: rdb, cl: cl}
}

// read runs cmd, a blocking read, with ctx: on the blocker's connection,
// ended by CLIENT UNBLOCK when ctx ends or close is called. cmd holds the
// result.
func (b *blocker) read(ctx context.Context, cmd goredis.Cmder) {
	if b.cl == nil {
		_ = b.rdb.Process(ctx, cmd)
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cmd.SetErr(errClosed)
		return
	}
	if b.conn == nil {
		b.conn = b.cl.EphemeralConn()
	}
	conn, ended := b.conn, make(chan struct{})
	b.ended = ended
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.ended = nil // no unblocking starts after this
		b.mu.Unlock()
		close(ended)     // one in progress stops
		b.unblock.Wait() // and is waited for
		b.mu.Lock()
		if b.closed {
			b.closeConn()
		}
		b.mu.Unlock()
	}()
	if b.id == 0 {
		id, err := conn.ClientID(ctx).Result()
		if err != nil {
			cmd.SetErr(err)
			return
		}
		b.mu.Lock()
		b.id = id
		closed := b.closed // a close that came before the ID could not unblock
		b.mu.Unlock()
		if closed {
			cmd.SetErr(errClosed)
			return
		}
	}
	stop := context.AfterFunc(ctx, func() { b.stop(ended) })
	defer stop()
	_ = conn.Process(ctx, cmd)
}

// name makes the reads' connection now and gives it the name name (CLIENT
// SETNAME), for as long as the blocker lives: the connection is discarded
// by close, never returned to the pool with the name. It returns the
// connection's client ID; 0 on a ClusterClient or a Ring, which it leaves
// alone.
func (b *blocker) name(ctx context.Context, name string) (int64, error) {
	if b.cl == nil {
		return 0, nil
	}
	b.mu.Lock()
	if b.conn == nil {
		b.conn = b.cl.EphemeralConn()
	}
	conn := b.conn
	b.mu.Unlock()
	var id *goredis.IntCmd
	if _, err := conn.Pipelined(ctx, func(p goredis.Pipeliner) error {
		p.ClientSetName(ctx, name)
		id = p.ClientID(ctx)
		return nil
	}); err != nil {
		return 0, err
	}
	b.mu.Lock()
	b.id = id.Val()
	b.mu.Unlock()
	return id.Val(), nil
}

// stop ends the read in flight, whose end closes ended. It starts an
// unblocking that read waits for.
func (b *blocker) stop(ended chan struct{}) {
	b.mu.Lock()
	id := b.id
	if b.ended != ended || id == 0 { // that read returned already
		b.mu.Unlock()
		return
	}
	b.unblock.Add(1)
	b.mu.Unlock()
	defer b.unblock.Done()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	// The read may not have reached the server yet: then nothing is
	// blocked (the reply is 0), and the read blocks a moment later.
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if n, err := b.cl.ClientUnblock(ctx, id).Result(); err != nil || n == 1 {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ended:
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		t.Stop()
		return
	}
}

// close ends the read in flight, if any, and releases the connection once
// it returned. Reads after it fail.
func (b *blocker) close() {
	if b.cl == nil {
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	ended := b.ended
	if ended == nil {
		b.closeConn()
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.stop(ended) // the read's end releases the connection
}

// closeConn releases the connection; b.mu is held.
func (b *blocker) closeConn() {
	if b.conn != nil {
		_ = b.conn.Close()
		b.conn = nil
	}
}
