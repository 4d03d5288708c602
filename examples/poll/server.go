package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
)

// Change is one entry of the feed: order Order moved to Status.
type Change struct {
	Seq    int64  `json:"seq"`
	Order  string `json:"order"`
	Status string `json:"status"`
}

// feed is the server side of the demo: an HTTP changes feed over an
// in-memory log that a writer appends to. GET /changes?after=N&limit=L
// answers up to L changes after N (an empty list when there are none yet),
// 410 Gone when N is older than the compaction point, now and then 500 or
// 503 with Retry-After; GET /snapshot answers the state of every order as
// of the compaction point, and that point.
type feed struct {
	mu        sync.Mutex
	log       []Change
	state     map[string]string // order → status, as of the last change
	compacted int64             // changes up to here are gone: older cursors get 410
	snap      map[string]string // the state as of compacted
	requests  int
	busyOnce  bool // answer the next request with 503, Retry-After: 1
}

func newFeed() *feed { return &feed{state: map[string]string{}} }

var statuses = []string{"created", "paid", "packed", "shipped"}

// write appends the next change: orders o-1..o-7, each moving through the
// statuses in turn.
func (f *feed) write() {
	f.mu.Lock()
	defer f.mu.Unlock()
	seq := int64(len(f.log)) + 1
	order := fmt.Sprintf("o-%d", (seq-1)%7+1)
	status := statuses[(seq-1)/7%int64(len(statuses))]
	f.log = append(f.log, Change{Seq: seq, Order: order, Status: status})
	f.state[order] = status
}

// compact drops the history so far, keeping a snapshot of the state: a
// client whose cursor is older gets 410 and must start again from the
// snapshot.
func (f *feed) compact() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compacted = int64(len(f.log))
	f.snap = maps.Clone(f.state)
}

// busy makes the next request answer 503 with Retry-After: 1.
func (f *feed) busy() {
	f.mu.Lock()
	f.busyOnce = true
	f.mu.Unlock()
}

// current returns a copy of the state and its sequence number.
func (f *feed) current() (map[string]string, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.state), int64(len(f.log))
}

func (f *feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	switch {
	case f.busyOnce:
		f.busyOnce = false
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	case f.requests%9 == 0:
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	switch r.URL.Path {
	case "/changes":
		f.changes(w, r)
	case "/snapshot":
		writeJSON(w, snapshot{Seq: f.compacted, Orders: f.snap})
	default:
		http.NotFound(w, r)
	}
}

func (f *feed) changes(w http.ResponseWriter, r *http.Request) {
	after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil || after < 0 || after > int64(len(f.log)) {
		http.Error(w, "bad cursor", http.StatusBadRequest)
		return
	}
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 {
		http.Error(w, "bad limit", http.StatusBadRequest)
		return
	}
	if after < f.compacted {
		http.Error(w, fmt.Sprintf("history before %d was compacted", f.compacted), http.StatusGone)
		return
	}
	end := min(after+int64(limit), int64(len(f.log)))
	writeJSON(w, page{Changes: f.log[after:end]})
}

// page is the body of GET /changes.
type page struct {
	Changes []Change `json:"changes"`
}

// snapshot is the body of GET /snapshot.
type snapshot struct {
	Seq    int64             `json:"seq"`
	Orders map[string]string `json:"orders"`
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
