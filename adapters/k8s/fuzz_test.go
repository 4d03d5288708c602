package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/adapters/k8s"
)

// fuzzScript is a watch script decoded from fuzz bytes, with what a
// RetryWatcher must make of it: the events its consumer receives, and the
// resource version each watch call asks for.
type fuzzScript struct {
	resync    bool
	steps     []step
	want      []string // describe() of each event received
	wantRVs   []string // the resource versions of the watch calls
	stops     bool     // the watcher stops by itself
	resyncRVs []string // the resource versions the ResyncFunc returns, in turn
}

// decodeFuzz turns data into a script and runs the model of client-go's
// contract (plus the resync) over it. The first byte chooses the resync;
// every other byte is one action.
func decodeFuzz(data []byte) fuzzScript {
	var s fuzzScript
	if len(data) > 0 {
		s.resync = data[0]&1 == 1
		data = data[1:]
	}
	if len(data) > 64 {
		data = data[:64]
	}
	rv := 5
	next := func(b byte) string {
		rv += 1 + int(b>>4)%3
		return strconv.Itoa(rv)
	}
	obj := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "o", ResourceVersion: rv}}
	}
	var cur *step
	flush := func() {
		if cur != nil {
			s.steps = append(s.steps, *cur)
			cur = nil
		}
	}
	for _, b := range data {
		switch b % 16 {
		case 0, 1, 2, 3, 4, 5:
			types := []watch.EventType{watch.Added, watch.Modified, watch.Deleted}
			if cur == nil {
				cur = &step{}
			}
			cur.events = append(cur.events, watch.Event{Type: types[b%3], Object: obj(next(b))})
		case 6:
			if cur == nil {
				cur = &step{}
			}
			cur.events = append(cur.events, watch.Event{Type: watch.Bookmark, Object: obj(next(b))})
		case 7, 8, 9, 15:
			invalid := []watch.Event{
				{Type: watch.Added, Object: obj("")},
				{Type: watch.Modified, Object: &noRV{}},
				{Type: "WEIRD", Object: obj(next(b))},
				{Type: watch.Bookmark, Object: obj("")},
			}
			if cur == nil {
				cur = &step{}
			}
			cur.events = append(cur.events, invalid[map[byte]int{7: 0, 8: 1, 9: 2, 15: 3}[b%16]])
		case 10, 14:
			codes := []int32{410, 500, 504, 403, 666, 0}
			ev := watch.Event{Type: watch.Error, Object: &notStatus{Reason: "odd"}}
			if c := codes[int(b>>4)%len(codes)]; c != 0 && b%16 == 10 {
				ev.Object = &metav1.Status{Code: c, Message: "code " + strconv.Itoa(int(c))}
			}
			if cur == nil {
				cur = &step{}
			}
			cur.events = append(cur.events, ev)
		case 11:
			if cur == nil {
				cur = &step{}
			}
			flush()
		case 12:
			flush()
			errs := []error{io.EOF, io.ErrUnexpectedEOF, timeoutError{}, errTest,
				newGone("gone"), apierrors.NewResourceExpired("too old"),
				apierrors.NewForbidden(schema.GroupResource{}, "", errTest), apierrors.NewUnauthorized("no")}
			s.steps = append(s.steps, step{err: errs[int(b>>4)%len(errs)]})
		case 13:
			flush()
			s.steps = append(s.steps, step{nilWatch: true})
		}
	}
	flush()
	s.model(&rv)
	return s
}

// model plays the script as client-go's RetryWatcher would (with the resync
// when it is on) and fills want, wantRVs and stops.
func (s *fuzzScript) model(rv *int) {
	last := "5"
	resync := func() {
		*rv++
		r := strconv.Itoa(*rv)
		s.resyncRVs = append(s.resyncRVs, r)
		s.want = append(s.want, "BOOKMARK:"+last+":marker", "ADDED:"+r, "BOOKMARK:"+r+":end")
		last = r
	}
	for _, st := range s.steps {
		s.wantRVs = append(s.wantRVs, last)
		switch {
		case st.err != nil:
			switch {
			case apierrors.IsForbidden(st.err) || apierrors.IsUnauthorized(st.err):
				s.want = append(s.want, "ERROR:"+strconv.Itoa(int(apierrors.APIStatus(st.err.(*apierrors.StatusError)).Status().Code)))
				s.stops = true
				return
			case s.resync && (apierrors.IsGone(st.err) || apierrors.IsResourceExpired(st.err)):
				resync()
			}
			continue
		case st.nilWatch:
			continue
		}
	events:
		for _, ev := range st.events {
			switch ev.Type {
			case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
				m, err := meta.Accessor(ev.Object)
				if err != nil || m.GetResourceVersion() == "" {
					s.want = append(s.want, "ERROR:500")
					s.stops = true
					return
				}
				if ev.Type != watch.Bookmark {
					s.want = append(s.want, describe(ev))
				}
				last = m.GetResourceVersion()
			case watch.Error:
				st, ok := ev.Object.(*metav1.Status)
				if ok && st.Code == 410 {
					if s.resync {
						resync()
						break events
					}
					s.want = append(s.want, describe(ev))
					s.stops = true
					return
				}
				break events // retried: the next step is the next watch
			default:
				s.want = append(s.want, "ERROR:500")
				s.stops = true
				return
			}
		}
	}
	s.wantRVs = append(s.wantRVs, last) // the idle watch after the script
}

// describe summarises an event for comparison.
func describe(ev watch.Event) string {
	if ev.Type == watch.Error {
		if st, ok := ev.Object.(*metav1.Status); ok {
			return "ERROR:" + strconv.Itoa(int(st.Code))
		}
		return "ERROR:not a status"
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return string(ev.Type) + ":?"
	}
	switch {
	case k8s.IsResyncMarker(ev):
		return string(ev.Type) + ":" + m.GetResourceVersion() + ":marker"
	case k8s.IsResyncEnd(ev):
		return string(ev.Type) + ":" + m.GetResourceVersion() + ":end"
	}
	return string(ev.Type) + ":" + m.GetResourceVersion()
}

// FuzzRetryWatcher plays arbitrary watch scripts — events of every type,
// resource versions empty or not, Status codes, objects that are no Status,
// failed opens — through a RetryWatcher and checks it against a model of
// client-go's contract: it never panics, delivers exactly the events it
// should in order, asks each watch for the right resource version, and
// ends with a closed ResultChan and Done after Stop.
func FuzzRetryWatcher(f *testing.F) {
	seeds := [][]byte{
		{0},
		{0, 0x00, 0x11, 0x22},       // three events, then the watch ends
		{0, 0x00, 0x06, 0x0b, 0x01}, // a bookmark, two watches
		{0, 0x00, 0x07, 0x01},       // an empty resource version
		{0, 0x00, 0x08},             // no GetResourceVersion
		{0, 0x09},                   // an unknown type
		{0, 0x00, 0x0a, 0x01},       // 410 in the stream
		{1, 0x00, 0x0a, 0x01},       // 410 in the stream, resynced
		{0, 0x00, 0x1a, 0x01, 0x2a, 0x02, 0x3a, 0x03}, // 500, 504, 403: retried
		{0, 0x0e, 0x00},                         // an error that is no Status
		{0, 0x0c, 0x1c, 0x2c, 0x3c, 0x0d, 0x00}, // EOF, unexpected EOF, timeout, other, nil watch
		{0, 0x4c, 0x5c, 0x00},                   // 410 and Expired at open: retried
		{1, 0x4c, 0x00, 0x5c, 0x01},             // 410 and Expired at open: resynced
		{0, 0x6c, 0x00},                         // Forbidden at open
		{0, 0x7c},                               // Unauthorized at open
		{0, 0x0f},                               // a bookmark with an empty resource version
		{1, 0x00, 0x0b, 0x0b, 0x4a, 0x0a, 0x06, 0x00, 0x0c},
	}
	for _, seed := range seeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := decodeFuzz(data)
		lw := newScripted(s.steps...)
		opts := []k8s.Option{k8s.WithMinRestartDelay(0)}
		if s.resync {
			calls := 0
			opts = append(opts, k8s.WithResync(func(_ context.Context, _ string, emit func(watch.Event) error) (string, error) {
				if calls >= len(s.resyncRVs) {
					return "", errors.New("fuzz: unexpected resync")
				}
				r := s.resyncRVs[calls]
				calls++
				return r, emit(watch.Event{Type: watch.Added, Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "r", ResourceVersion: r}}})
			}))
		}
		rw, err := k8s.NewRetryWatcherWithContext(context.Background(), "5", lw, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		timeout := time.After(deadline)
	read:
		for {
			select {
			case ev, ok := <-rw.ResultChan():
				if !ok {
					break read
				}
				got = append(got, describe(ev))
			case <-lw.idle:
				rw.Stop()
				for ev := range rw.ResultChan() {
					got = append(got, describe(ev))
				}
				break read
			case <-timeout:
				rw.Stop()
				t.Fatalf("the watcher neither stopped nor reached the end of the script; got %v", got)
			}
		}
		rw.Stop()
		select {
		case <-rw.Done():
		case <-time.After(deadline):
			t.Fatal("Done not closed after Stop")
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("events (-want +got):\n%s\nscript: %s", diff, s)
		}
		if diff := cmp.Diff(s.wantRVs, lw.rvs(t)); diff != "" {
			t.Errorf("watch resource versions (-want +got):\n%s\nscript: %s", diff, s)
		}
	})
}

func (s fuzzScript) String() string {
	out := fmt.Sprintf("resync=%v", s.resync)
	for _, st := range s.steps {
		switch {
		case st.err != nil:
			out += fmt.Sprintf(" | open fails: %v", st.err)
		case st.nilWatch:
			out += " | nil watch"
		default:
			out += " |"
			for _, ev := range st.events {
				out += " " + describe(ev)
			}
		}
	}
	return out
}
