package postgres

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		wait(t.Context(), 5*time.Millisecond)
		if got := time.Since(start); got != 5*time.Millisecond {
			t.Errorf("wait(5ms) took %v", got)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start = time.Now()
		wait(ctx, time.Hour)
		if got := time.Since(start); got != time.Second {
			t.Errorf("wait(1h) with a context ending after 1s took %v", got)
		}
	})
}

func TestDefaultTxRetry(t *testing.T) {
	seq := defaultTxRetry.NewSequence()
	retries := 0
	for {
		d, ok := seq.Next()
		if !ok {
			break
		}
		if d <= 0 || d > 2*time.Second {
			t.Errorf("delay %d = %v, want in (0, 2s]", retries, d)
		}
		retries++
		if retries > 100 {
			t.Fatalf("defaultTxRetry never gives up")
		}
	}
	if retries != 20 {
		t.Errorf("defaultTxRetry gave %d retries, want 20", retries)
	}
}
