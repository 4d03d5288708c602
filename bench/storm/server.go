package main

import (
	"context"
	"net"
	"net/url"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// errRefused is what a Watch call gets while the server is down: the
// error a client sees when it dials an API server that is restarting
// (client-go retries it; so does our classifier).
var errRefused error = &url.Error{
	Op:  "Get",
	URL: "https://apiserver.local/api/v1/pods?watch=true",
	Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)},
}

// server is an in-process API server's watch endpoint
// (cache.WatcherWithContext) that can drop every watch and refuse new ones.
// It logs the time of every Watch call and of every end of a watch; its
// watches never deliver an event.
type server struct {
	mu      sync.Mutex
	calls   []call
	ends    []time.Time // watches that ended: dropped or stopped
	down    bool
	watches map[*fakeWatch]struct{}
	want    int           // the number of watches to wait for (0: none)
	reached chan struct{} // closed when len(watches) reached want
	at      time.Time     // when it was reached
}

// call is one Watch call.
type call struct {
	at      time.Time
	refused bool
}

// newServer returns a server that accepts watches.
func newServer() *server {
	return &server{watches: make(map[*fakeWatch]struct{})}
}

// WatchWithContext opens a watch, or refuses while the server is down.
func (s *server) WatchWithContext(_ context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.calls = append(s.calls, call{at: now, refused: s.down})
	if s.down {
		return nil, errRefused
	}
	w := &fakeWatch{srv: s, ch: make(chan watch.Event)}
	s.watches[w] = struct{}{}
	if s.want > 0 && len(s.watches) >= s.want {
		s.want, s.at = 0, now
		close(s.reached)
	}
	return w, nil
}

// awaitWatches returns a channel closed once n watches are open, and a
// function that returns when that happened.
func (s *server) awaitWatches(n int) (<-chan struct{}, func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.reached, s.want = ch, n
	if len(s.watches) >= n {
		s.want, s.at = 0, time.Now()
		close(ch)
	}
	return ch, func() time.Time {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.at
	}
}

// dropAll closes every watch, as an API server that dies does, and refuses
// Watch calls until up is called. It returns when it dropped them.
func (s *server) dropAll() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.down = true
	for w := range s.watches {
		w.close()
		s.ends = append(s.ends, now)
	}
	clear(s.watches)
	return now
}

// up makes the server accept Watch calls again. It returns when.
func (s *server) up() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = false
	return time.Now()
}

// open returns the number of open watches.
func (s *server) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watches)
}

// log returns copies of the logs of calls and ends.
func (s *server) log() ([]call, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls), slices.Clone(s.ends)
}

// fakeWatch is a watch.Interface that delivers nothing until it is closed.
type fakeWatch struct {
	srv  *server
	ch   chan watch.Event
	once sync.Once
}

// ResultChan returns the watch's channel, closed when the watch ends.
func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }

// Stop ends the watch; it may be called more than once.
func (w *fakeWatch) Stop() {
	s := w.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, open := s.watches[w]; open {
		delete(s.watches, w)
		s.ends = append(s.ends, time.Now())
	}
	w.close()
}

func (w *fakeWatch) close() { w.once.Do(func() { close(w.ch) }) }
