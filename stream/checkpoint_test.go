package stream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// A Resumer with a File store is cancelled midway; a fresh store on the same
// path and a new Resumer continue with no gap and, since Run saves as it
// returns, no redelivery.
func TestFileStoreResumesAfterCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stream.cursor")
	tests := []struct {
		name string
		opts []stream.Option
	}{
		{name: "save every event"},
		{name: "every 5 events", opts: []stream.Option{stream.WithCheckpointEvery(5)}},
		{name: "only at the end", opts: []stream.Option{stream.WithCheckpointEvery(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := path + "." + tt.name
			log := letters(40)
			var seen []int64
			life := func(stopAt int64) error {
				store, err := cursor.NewFile(path, int64(0), cursor.Int64())
				if err != nil {
					t.Fatalf("NewFile() = %v", err)
				}
				src := streamtest.NewSource(log, streamtest.Step{Kind: streamtest.BreakAfter, K: 7})
				r, err := stream.New(src, extract, store, tt.opts...)
				if err != nil {
					t.Fatalf("New() = %v", err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				return r.Run(ctx, func(_ context.Context, e ev) error {
					seen = append(seen, e.Seq)
					if e.Seq == stopAt {
						cancel()
					}
					return nil
				})
			}
			if err := life(23); !errors.Is(err, context.Canceled) {
				t.Fatalf("first Run() = %v, want %v", err, context.Canceled)
			}
			if err := life(-1); err != nil {
				t.Fatalf("second Run() = %v, want nil", err)
			}
			if diff := cmp.Diff(seqs(1, 40), seen); diff != "" {
				t.Errorf("events over both lives (-want +got):\n%s", diff)
			}
		})
	}
}

// With a checkpoint every n events, the file is never more than n−1 events
// behind what the handler finished: the redelivery a crash can cause.
func TestFileStoreLagIsBounded(t *testing.T) {
	const n = 8
	path := filepath.Join(t.TempDir(), "stream.cursor")
	store, err := cursor.NewFile(path, int64(0), cursor.Int64())
	if err != nil {
		t.Fatalf("NewFile() = %v", err)
	}
	r, err := stream.New(streamtest.NewSource(letters(50)), extract, store, stream.WithCheckpointEvery(n))
	if err != nil {
		t.Fatalf("New() = %v", err)
	}
	maxLag := int64(0)
	err = r.Run(context.Background(), func(ctx context.Context, e ev) error {
		// A crash now would restart from what the file holds.
		fresh, err := cursor.NewFile(path, int64(0), cursor.Int64())
		if err != nil {
			return err
		}
		saved, err := fresh.Load(ctx)
		if err != nil {
			return err
		}
		committed := e.Seq - 1
		if saved > committed {
			t.Errorf("file holds %d, ahead of the committed %d", saved, committed)
		}
		maxLag = max(maxLag, committed-saved)
		return nil
	})
	if err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if maxLag != n-1 {
		t.Errorf("largest lag = %d, want %d", maxLag, n-1)
	}
}

// cancelOnFirstSave is a memory Store whose first Save cancels Run's
// context and fails with its error, as a Store honouring ctx does when the
// process shuts down during the Save.
type cancelOnFirstSave struct {
	cursor.Memory[int64]
	mu     sync.Mutex
	saves  int
	cancel context.CancelFunc
}

// Defect 13: a clean shutdown (ctx cancelled while Store.Save runs) is
// counted and logged as a failure.
func TestShutdownDuringSaveIsNoFailure(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				store := &cancelOnFirstSave{cancel: cancel}
				src := streamtest.NewSource(letters(3))
				src.SetEndOfLog(streamtest.Wait)
				core, logs := observer.New(zapcore.InfoLevel)
				var retries atomic.Int64
				r, err := stream.New(src, extract, store, stream.WithConcurrency(n), stream.WithLogger(zap.New(core)),
					stream.WithHooks(stream.Hooks[int64]{OnRetry: func(stream.RetryEvent[int64]) { retries.Add(1) }}))
				if err != nil {
					t.Fatal(err)
				}
				err = r.Run(ctx, func(context.Context, ev) error { return nil })
				if !errors.Is(err, context.Canceled) {
					t.Errorf("Run() = %v, want %v", err, context.Canceled)
				}
				st := r.Stats()
				if st.Retried != 0 || st.Failed != 0 || st.SaveErrors != 0 {
					t.Errorf("Stats() Retried = %d, Failed = %d, SaveErrors = %d, want 0, 0, 0: a shutdown is no failure", st.Retried, st.Failed, st.SaveErrors)
				}
				if got := retries.Load(); got != 0 {
					t.Errorf("OnRetry called %d times, want 0", got)
				}
				for _, e := range logs.All() {
					t.Errorf("logged %s %q %v, want nothing at Info or above", e.Level, e.Message, e.ContextMap())
				}
				if c, _ := store.Load(context.Background()); c != r.Cursor() {
					t.Errorf("saved cursor %d, want the committed %d (the final save)", c, r.Cursor())
				}
			})
		})
	}
}

func TestRepeatedCursorIsNotSaved(t *testing.T) {
	store := &flakyStore{}
	var opens atomic.Int64
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		if opens.Add(1) > 1 {
			return nil, stream.ErrEndOfStream
		}
		return newScriptConn(io.EOF, ev{Seq: 1}, ev{Seq: 1, Value: "beat"}, ev{Seq: 1, Value: "beat"}), nil
	})
	r, err := stream.New(src, heartbeatExtract, store, stream.WithBackoff(backoff.Constant(0)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(context.Context, ev) error { return nil }); err != nil {
		t.Fatalf("Run() = %v, want nil", err)
	}
	if store.saves != 1 {
		t.Errorf("%d saves, want 1: heartbeats at the committed cursor write nothing", store.saves)
	}
}

func TestFailedSaveIsReportedOnce(t *testing.T) {
	store := &flakyStore{}
	store.setFail(errclass.Permanent(errors.New("disk on fire")))
	src := stream.SourceFunc[ev, int64](func(context.Context, int64) (stream.Conn[ev], error) {
		return newScriptConn(io.EOF, ev{Seq: 1}), nil
	})
	r3, err := stream.New(src, extract, store)
	if err != nil {
		t.Fatal(err)
	}
	err = r3.Run(context.Background(), func(context.Context, ev) error { return nil })
	if err == nil {
		t.Fatal("Run() = nil, want the save's error")
	}
	if n := strings.Count(err.Error(), "disk on fire"); n != 1 {
		t.Errorf("Run() = %q: the save's error %d times, want once", err, n)
	}
	if got := r3.Stats().SaveErrors; got != 1 {
		t.Errorf("Stats().SaveErrors = %d, want 1 for one cursor", got)
	}
}

// failingSave is a Store that loads initial and fails every Save.
type failingSave[C any] struct {
	initial C
	err     error
}
