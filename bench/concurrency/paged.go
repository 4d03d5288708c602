package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// pagedConfig is the paged-feed run (-paged): a local HTTP feed of events
// paged by offset, consumed with stream.Pages and a durable cursor.File
// saved once a second at most (pagedCheckpoint) in every row, so that n = 1
// and n > 1 pay the same fsyncs: like is compared with like.
type pagedConfig struct {
	events, perPage, keys int
	sleep                 time.Duration
	ns                    []int
	dir                   string
}

// pagedCheckpoint is every row's save cadence (WithCheckpointInterval).
const pagedCheckpoint = time.Second

// pagedEvent is an event of the feed.
type pagedEvent struct {
	Offset int64 `json:"offset"`
	Key    int   `json:"key"`
}

// runPaged serves the feed on a loopback port and measures each n against
// n = 1, checking that every event was handled once per run.
func runPaged(ctx context.Context, cfg pagedConfig, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		page := make([]pagedEvent, 0, cfg.perPage)
		for o := after + 1; o <= int64(cfg.events) && len(page) < cfg.perPage; o++ {
			page = append(page, pagedEvent{Offset: o, Key: int(o*2654435761) % cfg.keys})
		}
		_ = json.NewEncoder(w).Encode(page)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/changes?after="
	fmt.Fprintf(out, "paged feed: %d events, %d a page, %d keys, handler sleeping %v, cursor.File saved every %v at most in every row\n", cfg.events, cfg.perPage, cfg.keys, cfg.sleep, pagedCheckpoint)
	var serial time.Duration
	for _, n := range append([]int{1}, cfg.ns...) {
		took, err := pagedRow(ctx, cfg, url, n)
		if err != nil {
			return fmt.Errorf("n = %d: %w", n, err)
		}
		if n == 1 {
			serial = took
		}
		fmt.Fprintf(out, "  n = %-3d %8v  %6.2f×\n", n, took.Round(time.Millisecond), serial.Seconds()/took.Seconds())
	}
	return nil
}

// pagedRow consumes the whole feed with n handlers and returns how long it
// took.
func pagedRow(ctx context.Context, cfg pagedConfig, url string, n int) (time.Duration, error) {
	store, err := cursor.NewFile(filepath.Join(cfg.dir, fmt.Sprintf("cursor-%d", n)), int64(0), cursor.Int64())
	if err != nil {
		return 0, err
	}
	client := &http.Client{Timeout: 10 * time.Second}
	src := stream.Pages(func(ctx context.Context, after int64) ([]pagedEvent, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+strconv.FormatInt(after, 10), nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if err := errclass.FromHTTP(resp); err != nil {
			return nil, err
		}
		var page []pagedEvent
		if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
			return nil, err
		}
		if len(page) == 0 && after >= int64(cfg.events) {
			return nil, stream.ErrEndOfStream
		}
		return page, nil
	})
	r, err := stream.New(src, func(e pagedEvent) (int64, error) { return e.Offset, nil }, store,
		stream.WithConcurrency(n), stream.WithOrderKey(func(e pagedEvent) int { return e.Key }),
		stream.WithCheckpointInterval(pagedCheckpoint))
	if err != nil {
		return 0, err
	}
	var mu sync.Mutex
	seen := make(map[int64]int, cfg.events)
	start := time.Now()
	err = r.Run(ctx, func(_ context.Context, e pagedEvent) error {
		time.Sleep(cfg.sleep)
		mu.Lock()
		seen[e.Offset]++
		mu.Unlock()
		return nil
	})
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	for o := int64(1); o <= int64(cfg.events); o++ {
		if seen[o] != 1 {
			return 0, fmt.Errorf("event %d handled %d times", o, seen[o])
		}
	}
	return took, nil
}
