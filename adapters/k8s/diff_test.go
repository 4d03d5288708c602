package k8s_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// object is the ConfigMap default/name with uid at rv.
func object(name, uid string, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: strconv.Itoa(rv),
	}, Data: map[string]string{"rv": strconv.Itoa(rv)}}
}

// tomb is the object of the Deleted event a diff delivers for an object
// that vanished: metadata only.
func tomb(name, uid string, rv int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: name, UID: types.UID(uid), ResourceVersion: strconv.Itoa(rv),
	}}
}

func ev(t watch.EventType, obj *corev1.ConfigMap) watch.Event {
	return watch.Event{Type: t, Object: obj}
}

func TestRetryWatcherResyncDiff(t *testing.T) {
	t.Parallel()
	gone := statusEvent(newGone("too old resource version").ErrStatus)
	openGone := newGone("too old resource version")
	a6, b7, c8 := object("a", "ua", 6), object("b", "ub", 7), object("c", "uc", 8)
	tests := []struct {
		name    string
		steps   []step
		results []resyncResult
		want    []watch.Event
		wantRVs []string
	}{
		{
			name: "only the difference, nothing for what did not change",
			steps: []step{{events: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7), ev(watch.Added, c8), ev(watch.Modified, object("b", "ub", 9)), gone,
			}}},
			results: []resyncResult{{rv: "20", replay: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, object("b", "ub", 12)), ev(watch.Added, object("d", "ud", 11)),
			}}},
			want: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7), ev(watch.Added, c8), ev(watch.Modified, object("b", "ub", 9)),
				marker(cmMarker, 9),
				ev(watch.Modified, object("b", "ub", 12)),
				ev(watch.Added, object("d", "ud", 11)),
				ev(watch.Deleted, tomb("c", "uc", 8)),
				endMarker(cmMarker, 20),
			},
			wantRVs: []string{"5", "20"},
		},
		{
			name:    "recreated under the same name: Deleted, then Added",
			steps:   []step{{events: []watch.Event{ev(watch.Added, a6), gone}}},
			results: []resyncResult{{rv: "20", replay: []watch.Event{ev(watch.Added, object("a", "ua2", 10))}}},
			want: []watch.Event{
				ev(watch.Added, a6),
				marker(cmMarker, 6),
				ev(watch.Deleted, tomb("a", "ua", 6)),
				ev(watch.Added, object("a", "ua2", 10)),
				endMarker(cmMarker, 20),
			},
			wantRVs: []string{"5", "20"},
		},
		{
			name: "what the consumer saw deleted is not tracked",
			steps: []step{{events: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7), ev(watch.Deleted, object("b", "ub", 8)), gone,
			}}},
			results: []resyncResult{{rv: "20", replay: []watch.Event{ev(watch.Added, a6)}}},
			want: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7), ev(watch.Deleted, object("b", "ub", 8)),
				marker(cmMarker, 8), endMarker(cmMarker, 20),
			},
			wantRVs: []string{"5", "20"},
		},
		{
			name:  "a second resync compares with what the first delivered",
			steps: []step{{events: []watch.Event{ev(watch.Added, a6), gone}}, {events: []watch.Event{ev(watch.Modified, object("a", "ua", 21)), gone}}},
			results: []resyncResult{
				{rv: "20", replay: []watch.Event{ev(watch.Added, a6), ev(watch.Added, object("b", "ub", 10))}},
				{rv: "30", replay: []watch.Event{ev(watch.Added, object("b", "ub", 10))}},
			},
			want: []watch.Event{
				ev(watch.Added, a6),
				marker(cmMarker, 6), ev(watch.Added, object("b", "ub", 10)), endMarker(cmMarker, 20),
				ev(watch.Modified, object("a", "ua", 21)),
				marker(cmMarker, 21), ev(watch.Deleted, tomb("a", "ua", 21)), endMarker(cmMarker, 30),
			},
			wantRVs: []string{"5", "20", "30"},
		},
		{
			name:  "a resync that fails half-way: the retry compares with what was delivered",
			steps: []step{{events: []watch.Event{ev(watch.Added, a6), ev(watch.Added, b7), gone}}, {err: openGone}},
			results: []resyncResult{
				{replay: []watch.Event{ev(watch.Added, object("a", "ua", 10))}, err: errTest},
				{rv: "20", replay: []watch.Event{ev(watch.Added, object("a", "ua", 10)), ev(watch.Added, object("c", "uc", 11))}},
			},
			want: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7),
				marker(cmMarker, 7), ev(watch.Modified, object("a", "ua", 10)),
				marker(cmMarker, 7), ev(watch.Added, object("c", "uc", 11)), ev(watch.Deleted, tomb("b", "ub", 7)), endMarker(cmMarker, 20),
			},
			wantRVs: []string{"5", "7", "20"},
		},
		{
			name:  "a replay started over forgets what its first pass listed",
			steps: []step{{events: []watch.Event{ev(watch.Added, a6), ev(watch.Added, b7), gone}}},
			results: []resyncResult{{rv: "20", replay: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7), ev(watch.Added, c8),
				marker(nil, 0), // start over
				ev(watch.Added, b7), ev(watch.Added, c8),
			}}},
			want: []watch.Event{
				ev(watch.Added, a6), ev(watch.Added, b7),
				marker(cmMarker, 7), ev(watch.Added, c8),
				marker(cmMarker, 7), ev(watch.Deleted, tomb("a", "ua", 6)), endMarker(cmMarker, 20),
			},
			wantRVs: []string{"5", "20"},
		},
		{
			name:    "bookmarks and deletions in the listing are ignored",
			steps:   []step{{events: []watch.Event{ev(watch.Added, a6), gone}}},
			results: []resyncResult{{rv: "20", replay: []watch.Event{bookmark(15), ev(watch.Deleted, a6), ev(watch.Modified, a6)}}},
			want:    []watch.Event{ev(watch.Added, a6), marker(cmMarker, 6), endMarker(cmMarker, 20)},
			wantRVs: []string{"5", "20"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lw := newScripted(tc.steps...)
			rs := &resyncScript{results: tc.results}
			rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
				k8s.WithMinRestartDelay(0), k8s.WithResync(rs.resync), k8s.WithResyncDiff())
			if err != nil {
				t.Fatal(err)
			}
			got := receive(t, rw, len(tc.want))
			lw.waitIdle(t)
			stop(t, rw)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantRVs, lw.rvs(t)); diff != "" {
				t.Errorf("watch resource versions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRetryWatcherResyncDiffKind checks that a Deleted event of a diff
// carries the group, version and kind of the objects watched, when they
// have one.
func TestRetryWatcherResyncDiffKind(t *testing.T) {
	t.Parallel()
	typed := object("a", "ua", 6)
	typed.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}
	lw := newScripted(step{events: []watch.Event{ev(watch.Added, typed), statusEvent(newGone("too old").ErrStatus)}})
	rs := &resyncScript{results: []resyncResult{{rv: "20"}}}
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithMinRestartDelay(0), k8s.WithResync(rs.resync), k8s.WithResyncDiff())
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 4)[2]
	stop(t, rw)
	want := tomb("a", "ua", 6)
	want.TypeMeta = typed.TypeMeta
	if diff := cmp.Diff(ev(watch.Deleted, want), got); diff != "" {
		t.Errorf("Deleted event (-want +got):\n%s", diff)
	}
}

// TestRetryWatcherResyncDiffKnown checks that the objects given to
// WithResyncDiff count as delivered: the consumer's own list.
func TestRetryWatcherResyncDiffKnown(t *testing.T) {
	t.Parallel()
	list := &corev1.ConfigMapList{Items: []corev1.ConfigMap{*object("a", "ua", 3), *object("b", "ub", 4)}}
	lw := newScripted(step{err: newGone("too old")})
	rs := &resyncScript{results: []resyncResult{{rv: "20", replay: []watch.Event{ev(watch.Added, object("a", "ua", 3)), ev(watch.Added, object("c", "uc", 11))}}}}
	rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw,
		k8s.WithMinRestartDelay(0), k8s.WithResync(rs.resync), k8s.WithResyncDiff(list, object("d", "ud", 2)))
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, rw, 5)
	stop(t, rw)
	// The sweep's order is the map's: compare the deletions as a set.
	want := []watch.Event{marker(cmMarker, 5), ev(watch.Added, object("c", "uc", 11))}
	if diff := cmp.Diff(want, got[:2]); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	deleted := map[string]watch.Event{}
	for _, e := range got[2:4] {
		deleted[e.Object.(*corev1.ConfigMap).Name] = e
	}
	wantDeleted := map[string]watch.Event{"b": ev(watch.Deleted, tomb("b", "ub", 4)), "d": ev(watch.Deleted, tomb("d", "ud", 2))}
	if diff := cmp.Diff(wantDeleted, deleted); diff != "" {
		t.Errorf("Deleted events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(endMarker(cmMarker, 20), got[4]); diff != "" {
		t.Errorf("last event (-want +got):\n%s", diff)
	}
}
