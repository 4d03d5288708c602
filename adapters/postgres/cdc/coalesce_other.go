//go:build !linux

package cdc

import (
	"net"
	"time"
)

// newCoalescing returns nil: reading a socket without waiting is done on
// Linux only.
func newCoalescing(net.Conn) *coalescingConn { return nil }

func (c *coalescingConn) tryRead([]byte) (int, bool, error) { return 0, false, nil }

func pause(time.Duration) {}
