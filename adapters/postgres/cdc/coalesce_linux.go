package cdc

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// newCoalescing returns nc read through a coalescingConn, or nil when nc
// is not a plain socket (TLS reads records, not bytes).
func newCoalescing(nc net.Conn) *coalescingConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &coalescingConn{Conn: nc, raw: raw}
}

// tryRead reads what the socket holds without waiting; ok is false when
// it holds nothing. A passed read deadline fails it with a timeout, as it
// fails the socket's Read (RawConn.Read checks it first): the status
// interval's deadline fires under a flood of messages too.
func (c *coalescingConn) tryRead(p []byte) (n int, ok bool, err error) {
	var rerr error
	if err := c.raw.Read(func(fd uintptr) bool {
		n, rerr = syscall.Read(int(fd), p)
		return true
	}); err != nil {
		return 0, true, err
	}
	switch {
	case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		return 0, false, nil
	case rerr != nil:
		return 0, true, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, true, io.EOF
	}
	return n, true, nil
}

// pause waits d in a system call: the thread sleeps, and nothing of the
// scheduler's (a timer, a poller wake-up, another thread) is involved.
func pause(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // EINTR: a shorter wait
}
