// Package wait is the context-aware sleep of the root module's packages and
// of the adapters.
package wait

import (
	"context"
	"time"
)

// Sleep waits d, or returns ctx's error when ctx ends first. With d <= 0 it
// returns at once, with ctx's error if ctx already ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
