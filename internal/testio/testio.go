// Package testio holds writers for the tests of the repository's example
// programs. It is for our tests, not for users.
package testio

import (
	"bytes"
	"context"
	"sync"
)

// CancelAt is an io.Writer that keeps what is written and calls Cancel the
// first time (and each later time) a write contains Marker: it cancels a
// program at a known point of its output. It is safe for concurrent use.
type CancelAt struct {
	Marker string
	Cancel context.CancelFunc

	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (w *CancelAt) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.Marker)) {
		w.Cancel()
	}
	return w.buf.Write(p)
}

// String returns everything written so far.
func (w *CancelAt) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
