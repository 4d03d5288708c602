package k8s_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// watchOnly is a cache.Watcher and nothing more: client-go's Until takes
// one, so ours must too.
type watchOnly struct{ s *scripted }

func (w watchOnly) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return w.s.WatchWithContext(context.Background(), o)
}

var _ cache.Watcher = watchOnly{}

func isType(t watch.EventType) watchtools.ConditionFunc {
	return func(ev watch.Event) (bool, error) { return ev.Type == t, nil }
}

func TestUntil(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("too old").ErrStatus)
	always := func(watch.Event) (bool, error) { return true, nil }
	failing := func(watch.Event) (bool, error) { return false, errTest }
	tests := []struct {
		name       string
		rv         string
		nilClient  bool
		steps      []step
		conditions []watchtools.ConditionFunc
		want       *watch.Event
		wantErr    error
	}{
		{
			name:       "conditions met in turn, across a reopened watch",
			rv:         "5",
			steps:      []step{{events: []watch.Event{added(6)}}, {events: []watch.Event{modified(7), deleted(8)}, keepOpen: true}},
			conditions: []watchtools.ConditionFunc{isType(watch.Added), isType(watch.Deleted)},
			want:       &[]watch.Event{deleted(8)}[0],
		},
		{
			name:       "a condition already met by the previous event",
			rv:         "5",
			steps:      []step{{events: []watch.Event{added(6)}, keepOpen: true}},
			conditions: []watchtools.ConditionFunc{isType(watch.Added), always},
			want:       &[]watch.Event{added(6)}[0],
		},
		{
			name:       "a failing condition",
			rv:         "5",
			steps:      []step{{events: []watch.Event{added(6)}, keepOpen: true}},
			conditions: []watchtools.ConditionFunc{failing},
			want:       &[]watch.Event{added(6)}[0],
			wantErr:    errTest,
		},
		{
			name:       "the watcher stops on 410 Gone",
			rv:         "5",
			steps:      []step{{events: []watch.Event{added(6), gone}}},
			conditions: []watchtools.ConditionFunc{isType(watch.Deleted)},
			want:       &gone,
			wantErr:    watchtools.ErrWatchClosed,
		},
		{
			name:       "no conditions",
			rv:         "5",
			conditions: nil,
		},
		{
			name:      "nil watcher client",
			rv:        "5",
			nilClient: true,
			wantErr:   errors.New("k8s: Until: watcherClient = nil: must not be nil"),
		},
		{
			name:    "initial RV 0",
			rv:      "0",
			wantErr: errors.New(`initial RV "0" is not supported due to issues with underlying WATCH`),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w cache.Watcher
			if !tc.nilClient {
				w = watchOnly{newScripted(tc.steps...)}
			}
			got, err := k8s.Until(context.Background(), tc.rv, w, tc.conditions...)
			if (err == nil) != (tc.wantErr == nil) || err != nil && !errors.Is(err, tc.wantErr) && err.Error() != tc.wantErr.Error() {
				t.Errorf("Until() error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Until() event (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUntilContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		deadline bool // else cancelled by the condition
		steps    []step
		want     *watch.Event
		wantErr  error
	}{
		{name: "cancelled", steps: []step{{events: []watch.Event{added(6)}, keepOpen: true}}, want: &[]watch.Event{added(6)}[0], wantErr: context.Canceled},
		{name: "deadline", deadline: true, wantErr: context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			if tc.deadline {
				ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
			}
			defer cancel()
			got, err := k8s.Until(ctx, "5", watchOnly{newScripted(tc.steps...)}, func(ev watch.Event) (bool, error) {
				cancel()
				return false, nil
			})
			if !wait.Interrupted(err) || !errors.Is(err, tc.wantErr) {
				t.Errorf("Until() = %v, want an interruption matching %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Until() event (-want +got):\n%s", diff)
			}
		})
	}
}
