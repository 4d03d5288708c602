package redis

import (
	"context"
	"net"
	"sync"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// laneSize is the connections of a lane: the blocking read, and the
// acknowledgements sent at a connection's close while it may still run.
const laneSize = 2

// blocker runs a connection's blocking reads (XREAD and XREADGROUP with
// BLOCK) so that the end of their context, or the connection's Close, ends
// them at once, even when the server does not answer. On a *Client they
// run on a client of their own (the lane: the user's options, at most
// laneSize connections, dialled through a dialer that keeps the sockets),
// so that they never hold a connection of the user's pool, and ending one
// closes its socket (hooks added to the user's client with AddHook do not
// see the lane's commands); on a ClusterClient or a Ring they run as any command
// does, and end within the block time.
type blocker struct {
	rdb  goredis.UniversalClient
	opt  *goredis.Options // rdb's options, when it is a *Client; nil otherwise
	name string           // the lane's client name (CLIENT SETNAME); "" for none

	mu     sync.Mutex
	lane   *goredis.Client // nil before the first use
	socks  map[net.Conn]bool
	closed bool
}

func newBlocker(rdb goredis.UniversalClient) *blocker {
	b := &blocker{rdb: rdb}
	if cl, ok := rdb.(*goredis.Client); ok {
		b.opt = cl.Options()
	}
	return b
}

// client returns the lane, made at the first call; nil after close.
func (b *blocker) client() *goredis.Client {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.opt == nil {
		return nil
	}
	if b.lane == nil {
		o := *b.opt
		// The user's client set these up for itself: the lane must not
		// share its push processor, nor take part in maintenance
		// notifications (its reads end and reopen on any failure).
		o.PushNotificationProcessor = nil
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = laneSize, 0, laneSize, laneSize
		// No pool of its own for pipelines (go-redis adds one of up to 10
		// connections with 128 KiB buffers): a connection's reads run one at
		// a time, pipelined or not, on one socket.
		o.PipelinePoolSize = -1
		o.MaxRetries = -1 // the lane's commands are never retried by go-redis
		if b.name != "" {
			o.ClientName = b.name
		}
		dial := o.Dialer
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.socks == nil {
				b.socks = make(map[net.Conn]bool)
			}
			b.socks[c] = true
			return c, nil
		}
		b.lane = goredis.NewClient(&o)
	}
	return b.lane
}

// read runs cmd, a blocking read, with ctx; cmd holds the result. When ctx
// ends first, the read ends at once with ctx's error.
func (b *blocker) read(ctx context.Context, cmd goredis.Cmder) {
	if b.opt == nil {
		_ = b.rdb.Process(ctx, cmd)
		return
	}
	lane := b.client()
	if lane == nil {
		cmd.SetErr(errClosed)
		return
	}
	b.run(ctx, func(ctx context.Context) error { return lane.Process(ctx, cmd) })
	if err := ctx.Err(); err != nil && cmd.Err() != nil {
		cmd.SetErr(err)
	}
}

// via returns the client a connection's commands go through: the lane on
// a *Client, the user's client otherwise.
func (b *blocker) via() goredis.UniversalClient {
	if lane := b.client(); lane != nil {
		return lane
	}
	return b.rdb
}

// run runs do on the lane with ctx, closing the lane's sockets when ctx
// ends first: go-redis does not interrupt a command when its context ends,
// and a server that does not answer would hold it for the read timeout.
// When ctx ended, run returns once the sockets are closed: a close still
// under way would cut the socket of a later command (the acknowledgements
// a Group's Close sends).
func (b *blocker) run(ctx context.Context, do func(context.Context) error) {
	if ctx.Done() == nil { // ctx never ends
		_ = do(ctx)
		return
	}
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(cut)
		b.cut()
	})
	defer func() {
		if !stop() {
			<-cut
		}
	}()
	_ = do(ctx)
}

// cut closes the lane's sockets: a command in flight on them fails at
// once, and the next one dials again.
func (b *blocker) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.socks {
		_ = c.Close()
	}
	clear(b.socks)
}

// named makes the lane now, its connections named name (CLIENT SETNAME),
// and returns the client ID of one; 0 on a ClusterClient or a Ring, which
// it leaves alone. The name goes with the lane (close): no connection of
// the user's pool ever bears it.
func (b *blocker) named(ctx context.Context, name string) (int64, error) {
	if b.opt == nil {
		return 0, nil
	}
	b.mu.Lock()
	b.name = name
	b.mu.Unlock()
	lane := b.client()
	if lane == nil {
		return 0, errClosed
	}
	return lane.ClientID(ctx).Result()
}

// close ends the read in flight, if any, and closes the lane. Reads after
// it fail. It may be called more than once.
func (b *blocker) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	lane := b.lane
	b.mu.Unlock()
	b.cut()
	if lane != nil {
		_ = lane.Close()
	}
}
