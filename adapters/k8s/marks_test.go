package k8s_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
	"github.com/resumable-go/resumable/errclass"
)

// TestWatchSourceMarksItsErrors: WatchSource marks each failure where it
// arises, so errclass.Default alone decides as client-go's rules do (with
// a 410 at open expired, where StatusClassifier(false) retries it).
func TestWatchSourceMarksItsErrors(t *testing.T) {
	t.Parallel()
	retry := errclass.Decision{Action: errclass.Retry}
	fail := errclass.Decision{Action: errclass.Fail}
	expired := errclass.Decision{Action: errclass.Expired}
	forbidden := apierrors.NewForbidden(schema.GroupResource{}, "", errTest)
	tests := []struct {
		name string
		step step
		want errclass.Decision
	}{
		{name: "stream: 410", step: step{events: []watch.Event{statusEvent(newGone("old").ErrStatus)}}, want: expired},
		{name: "stream: 410 Expired", step: step{events: []watch.Event{statusEvent(apierrors.NewResourceExpired("old").ErrStatus)}}, want: expired},
		{name: "stream: 500", step: step{events: []watch.Event{statusEvent(apierrors.NewInternalError(errTest).ErrStatus)}}, want: retry},
		{name: "stream: 504 after 3s", step: step{events: []watch.Event{statusEvent(apierrors.NewTimeoutError("etcd", 3).ErrStatus)}},
			want: errclass.Decision{Action: errclass.Retry, After: 3 * time.Second}},
		{name: "stream: 403", step: step{events: []watch.Event{statusEvent(forbidden.ErrStatus)}}, want: retry},
		{name: "stream: not a Status", step: step{events: []watch.Event{{Type: watch.Error, Object: &notStatus{}}}}, want: retry},
		{name: "open: Forbidden", step: step{err: forbidden}, want: fail},
		{name: "open: Unauthorized", step: step{err: apierrors.NewUnauthorized("no")}, want: fail},
		{name: "open: 410 Gone", step: step{err: newGone("old")}, want: expired},
		{name: "open: Expired", step: step{err: apierrors.NewResourceExpired("old")}, want: expired},
		{name: "open: io.EOF", step: step{err: io.EOF}, want: retry},
		{name: "open: timeout", step: step{err: timeoutError{}}, want: retry},
		{name: "open: marked by the client", step: step{err: errclass.Permanent(newGone("old"))}, want: fail},
		{name: "open: other", step: step{err: errTest}, want: retry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			err := func() error {
				conn, err := k8s.WatchSource(newScripted(tc.step)).Open(ctx, "5")
				if err != nil {
					return err
				}
				defer conn.Close()
				_, err = conn.Recv(ctx)
				return err
			}()
			if err == nil {
				t.Fatal("Open and Recv = nil error, want the step's failure")
			}
			if got := errclass.Default().Classify(err); got != tc.want {
				t.Errorf("Default().Classify(%v) = %v, want %v", err, got, tc.want)
			}
			// The marks keep the failure reachable.
			if tc.step.err != nil && !errors.Is(err, tc.step.err) {
				t.Errorf("errors.Is(%v, %v) = false, want true", err, tc.step.err)
			}
			var ee *k8s.EventError
			if tc.step.err == nil && !errors.As(err, &ee) {
				t.Errorf("errors.As(%v, *EventError) = false, want true", err)
			}
		})
	}
}
