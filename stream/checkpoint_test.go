package stream_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/cursor"
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
