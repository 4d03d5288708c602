package cursor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/resumable-go/resumable/cursor"
)

var _ cursor.Store[string] = (*cursor.Memory[string])(nil)

func TestMemoryLoadSave(t *testing.T) {
	tests := []struct {
		name  string
		store *cursor.Memory[string]
		saves []string
		want  string
	}{
		{name: "zero value", store: &cursor.Memory[string]{}, want: ""},
		{name: "initial", store: cursor.NewMemory("10"), want: "10"},
		{name: "one save", store: cursor.NewMemory("10"), saves: []string{"11"}, want: "11"},
		{name: "last save wins", store: cursor.NewMemory("10"), saves: []string{"11", "13", "12"}, want: "12"},
		{name: "zero value saves", store: &cursor.Memory[string]{}, saves: []string{"a"}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			for _, c := range tt.saves {
				if err := tt.store.Save(ctx, c); err != nil {
					t.Fatalf("Save(%q) = %v, want nil", c, err)
				}
			}
			got, err := tt.store.Load(ctx)
			if err != nil || got != tt.want {
				t.Errorf("Load() = %q, %v, want %q, nil", got, err, tt.want)
			}
		})
	}
}

func TestMemoryContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := cursor.NewMemory(1)
	if _, err := m.Load(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Load(cancelled) = %v, want context.Canceled", err)
	}
	// Save ignores ctx, so that a final save after cancellation lands.
	if err := m.Save(ctx, 2); err != nil {
		t.Errorf("Save(cancelled) = %v, want nil", err)
	}
	if got, err := m.Load(context.Background()); err != nil || got != 2 {
		t.Errorf("Load() = %v, %v, want 2, nil", got, err)
	}
}

func TestMemoryConcurrent(t *testing.T) {
	m := cursor.NewMemory(-1)
	ctx := context.Background()
	const writers, saves = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range saves {
				if err := m.Save(ctx, w*saves+i); err != nil {
					t.Errorf("Save() = %v, want nil", err)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range saves {
				got, err := m.Load(ctx)
				if err != nil || got < -1 || got >= writers*saves {
					t.Errorf("Load() = %v, %v, want a saved cursor", got, err)
				}
			}
		}()
	}
	wg.Wait()
}

func TestProgressOnlyWrapped(t *testing.T) {
	err := fmt.Errorf("stream: event 3: %w", cursor.ProgressOnly)
	if !errors.Is(err, cursor.ProgressOnly) {
		t.Errorf("errors.Is(%v, ProgressOnly) = false, want true", err)
	}
}
