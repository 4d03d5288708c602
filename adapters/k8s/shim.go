package k8s

import (
	"context"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/stream"
)

// coreResync adapts the streaming resync hook to the core's current
// signature, which returns the replay as a slice. It goes away when the
// core streams.
func coreResync(f func(ctx context.Context, cause error, emit func(watch.Event) error) (string, error)) stream.ResyncFunc[watch.Event, string] {
	return func(ctx context.Context, cause error) (string, []watch.Event, error) {
		var replay []watch.Event
		rv, err := f(ctx, cause, func(ev watch.Event) error {
			replay = append(replay, ev)
			return nil
		})
		return rv, replay, err
	}
}
