package cdc

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// coalesceGap is how long a read of a busy replication connection lets
// bytes gather in the socket before it takes them: a change waits at most
// this long, and a stream of many small messages (single-row
// transactions) costs one wake-up per gap instead of one per few
// messages. The server sends each message as it decodes it; on a busy
// stream a wake-up of this process (the scheduler's, the poller's, the
// thread's) cost more CPU than decoding the few messages it found.
const coalesceGap = time.Millisecond

// replicationConfig returns cfg with its network connections read through
// coalescingConn, where the platform allows it (see newCoalescing).
func replicationConfig(cfg *pgconn.Config) *pgconn.Config {
	cfg = cfg.Copy()
	cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, nc net.Conn) (net.Conn, error) {
		if c := newCoalescing(nc); c != nil {
			return c, nil
		}
		return nc, nil
	}
	return cfg
}

// coalescingConn is a replication connection's socket. A read that found
// its bytes within coalesceGap of asking (the stream is busy) makes the
// next read that finds the socket empty wait coalesceGap, bounded by the
// read deadline, and then take what gathered; a read that still finds
// nothing waits in the poller as usual, and the stream is quiet again. A
// quiet stream's changes wait for nothing.
//
// Read is called by one goroutine at a time (pgconn's reader); the
// deadlines may be set from any goroutine.
type coalescingConn struct {
	net.Conn
	raw      syscall.RawConn
	deadline atomic.Int64 // the read deadline set last, unix ns; 0: none
	busy     bool
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	if c.busy && len(p) > 0 {
		if n, ok, err := c.tryRead(p); ok {
			return n, err
		}
		wait := coalesceGap
		if dl := c.deadline.Load(); dl != 0 {
			wait = min(wait, time.Until(time.Unix(0, dl)))
		}
		if wait > 0 {
			pause(wait)
			if n, ok, err := c.tryRead(p); ok {
				return n, err
			}
		}
		c.busy = false
	}
	start := time.Now()
	n, err := c.Conn.Read(p)
	c.busy = n > 0 && time.Since(start) < coalesceGap
	return n, err
}

func (c *coalescingConn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *coalescingConn) SetReadDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *coalescingConn) noteDeadline(t time.Time) {
	if t.IsZero() {
		c.deadline.Store(0)
		return
	}
	c.deadline.Store(t.UnixNano())
}
