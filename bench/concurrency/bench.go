package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// config is what one table measures.
type config struct {
	events   int
	maxSleep time.Duration
	seed     uint64
	window   int   // 0: the default
	keys     []int // 0: no key
	ns       []int
}

// item is one event's payload: a random number the key is drawn from, and
// how long the handler sleeps on it.
type item struct {
	R     uint64
	Sleep time.Duration
}

type event = streamtest.Event[item]

// row is one measured configuration.
type row struct {
	Keys        int // 0: no key; -1: the serial row, where keys change nothing
	N           int
	Window      int // 0 on the serial row
	Wall        time.Duration
	Speedup     float64 // serial wall time / this one's
	VsSleeps    float64 // the sum of the handler's sleeps / this wall time: the speedup over an ideal serial run
	Goal        float64 // the speedup the issue asks for; 0: none
	MaxInFlight int     // most handlers seen running at once
	Violations  int     // events of one key that overlapped or came out of stream order
}

func (r row) keyLabel() string {
	switch r.Keys {
	case -1:
		return "serial"
	case 0:
		return "none"
	}
	return fmt.Sprint(r.Keys)
}

func (r row) label() string {
	if r.Keys < 0 {
		return fmt.Sprintf("serial: %v", r.Wall.Round(time.Millisecond))
	}
	return fmt.Sprintf("keys %s, n %d: %v, %.2f× (%.2f× the sleeps)", r.keyLabel(), r.N, r.Wall.Round(time.Millisecond), r.Speedup, r.VsSleeps)
}

// goal returns the speedup the issue asks of keys and n (0: none).
func goal(keys, n int) float64 {
	switch {
	case n == 16 && (keys == 1000 || keys == 0):
		return 14
	case n == 16 && keys == 20:
		return 9
	case n == 64 && keys == 1000:
		return 50
	}
	return 0
}

// makeLog returns the stream's events, the same for every row.
func makeLog(cfg config) []item {
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	log := make([]item, cfg.events)
	for i := range log {
		log[i] = item{R: rng.Uint64(), Sleep: time.Duration(rng.Int64N(int64(cfg.maxSleep) + 1))}
	}
	return log
}

// measure runs the serial row, then one row per key count and n, calling
// each as it is measured.
func measure(ctx context.Context, cfg config, each func(row)) ([]row, error) {
	log := makeLog(cfg)
	var slept time.Duration
	for _, it := range log {
		slept += it.Sleep
	}
	serial, err := runRow(ctx, log, -1, 1, 0)
	if err != nil {
		return nil, err
	}
	serial.Speedup, serial.VsSleeps = 1, slept.Seconds()/serial.Wall.Seconds()
	each(serial)
	rows := []row{serial}
	for _, keys := range cfg.keys {
		for _, n := range cfg.ns {
			r, err := runRow(ctx, log, keys, n, cfg.window)
			if err != nil {
				return nil, err
			}
			r.Speedup = serial.Wall.Seconds() / r.Wall.Seconds()
			r.VsSleeps = slept.Seconds() / r.Wall.Seconds()
			r.Goal = goal(keys, n)
			each(r)
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// keyState tracks one key's events in the handler.
type keyState struct {
	busy atomic.Bool
	last atomic.Int64 // the sequence number of its last event
}

// runRow runs one Resumer over log to its end with n handlers and, when
// keys > 0, keys keys (window 0: the default).
func runRow(ctx context.Context, log []item, keys, n, window int) (row, error) {
	opts := []stream.Option{stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(n)}
	if window > 0 {
		opts = append(opts, stream.WithWindow(window))
	}
	states := make([]keyState, max(keys, 1))
	key := func(e event) uint64 { return e.Value.R % uint64(len(states)) }
	if keys > 0 {
		opts = append(opts, stream.WithOrderKey(key))
	}
	r, err := stream.New(streamtest.NewSource(log), streamtest.Extract[item], cursor.NewMemory[int64](0), opts...)
	if err != nil {
		return row{}, err
	}
	var running, most, violations, handled atomic.Int64
	handle := func(_ context.Context, e event) error {
		if keys > 0 {
			st := &states[key(e)]
			if !st.busy.CompareAndSwap(false, true) {
				violations.Add(1)
			}
			if prev := st.last.Swap(e.Seq); prev >= e.Seq {
				violations.Add(1)
			}
			defer st.busy.Store(false)
		}
		now := running.Add(1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		time.Sleep(e.Value.Sleep)
		running.Add(-1)
		handled.Add(1)
		return nil
	}
	start := time.Now()
	if err := r.Run(ctx, handle); err != nil {
		return row{}, fmt.Errorf("concurrency: keys %d, n %d: Run() = %w", keys, n, err)
	}
	wall := time.Since(start)
	st := r.Stats()
	if got := handled.Load(); got != int64(len(log)) || st.Cursor != int64(len(log)) || st.InFlight != 0 {
		return row{}, fmt.Errorf("concurrency: keys %d, n %d: %d events handled, cursor %d, %d in flight; want %d, %d, 0",
			keys, n, got, st.Cursor, st.InFlight, len(log), len(log))
	}
	if window == 0 && n > 1 {
		window = max(64, 4*n) // stream's documented default
	}
	return row{Keys: keys, N: n, Window: window, Wall: wall, MaxInFlight: int(most.Load()), Violations: int(violations.Load())}, nil
}
