package testio_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/resumable-go/resumable/internal/testio"
)

func TestCancelAt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &testio.CancelAt{Marker: "event 2", Cancel: cancel}
	for i := 1; i <= 3; i++ {
		if i == 2 && ctx.Err() != nil {
			t.Fatal("cancelled before the marker was written")
		}
		fmt.Fprintf(w, "event %d\n", i)
	}
	if ctx.Err() == nil {
		t.Error("not cancelled after the marker was written")
	}
	if got, want := w.String(), "event 1\nevent 2\nevent 3\n"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
