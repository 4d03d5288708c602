package wait_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/internal/wait"
)

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := wait.Sleep(context.Background(), time.Hour); err != nil || time.Since(start) != time.Hour {
			t.Errorf("Sleep(1h) = %v after %v, want nil after 1h", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start = time.Now()
		if err := wait.Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Minute {
			t.Errorf("Sleep(1h) with a 1m deadline = %v after %v, want %v after 1m", err, time.Since(start), context.DeadlineExceeded)
		}
		if err := wait.Sleep(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Sleep(0) on an ended ctx = %v, want %v", err, context.DeadlineExceeded)
		}
		if err := wait.Sleep(context.Background(), -time.Second); err != nil {
			t.Errorf("Sleep(-1s) = %v, want nil at once", err)
		}
	})
}
