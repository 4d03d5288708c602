package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// memConfig is what the memory run does.
type memConfig struct {
	duration time.Duration // how long the event stays stuck
	n, keys  int
	window   int // 0: the default
	stuck    int64
	every    time.Duration // sampling period
}

// endless is a server that never stops sending: every Recv returns the next
// event at once.
type endless struct{}

func (endless) Open(_ context.Context, after int64) (stream.Conn[event], error) {
	return &endlessConn{next: after}, nil
}

type endlessConn struct{ next int64 }

func (c *endlessConn) Recv(context.Context) (event, error) {
	c.next++
	return event{Seq: c.next, Value: item{R: uint64(c.next) * 0x9e3779b97f4a7c15}}, nil
}

func (c *endlessConn) Close() error { return nil }

// sample is one reading of the heap and the Resumer.
type sample struct {
	at        time.Duration
	heapInuse uint64
	inFlight  int
	events    uint64
}

// runMemory runs a Resumer on an endless server whose event cfg.stuck is
// held by its handler for cfg.duration, sampling the heap (after a GC) every
// cfg.every, and prints the samples and their spread.
func runMemory(ctx context.Context, cfg memConfig, out io.Writer) error {
	if cfg.stuck == 0 {
		cfg.stuck = 100
	}
	if cfg.every == 0 {
		cfg.every = min(time.Second, cfg.duration/10)
	}
	opts := []stream.Option{
		stream.WithBackoff(backoff.Constant(0)), stream.WithConcurrency(cfg.n),
		stream.WithOrderKey(func(e event) uint64 { return e.Value.R % uint64(cfg.keys) }),
	}
	if cfg.window > 0 {
		opts = append(opts, stream.WithWindow(cfg.window))
	}
	r, err := stream.New(stream.Source[event, int64](endless{}), func(e event) (int64, error) { return e.Seq, nil },
		cursor.NewMemory[int64](0), opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, func(ctx context.Context, e event) error {
			if e.Seq == cfg.stuck {
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()

	fmt.Fprintf(out, "memory: n %d, %d keys, event %d stuck for %v, an endless server; heap in use after a GC:\n", cfg.n, cfg.keys, cfg.stuck, cfg.duration)
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(cfg.every)
	defer tick.Stop()
	var ms runtime.MemStats
	for time.Since(start) < cfg.duration {
		select {
		case <-tick.C:
		case err := <-done:
			return fmt.Errorf("concurrency: Run returned while an event was stuck: %v", err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms)
		st := r.Stats()
		s := sample{at: time.Since(start), heapInuse: ms.HeapInuse, inFlight: st.InFlight, events: st.Events}
		samples = append(samples, s)
		fmt.Fprintf(out, "  %6.1fs  %8.1f KiB  in flight %4d  committed %d\n", s.at.Seconds(), float64(s.heapInuse)/1024, s.inFlight, s.events)
	}
	close(release)
	// Let the stream move again, then stop it.
	for deadline := time.Now().Add(10 * time.Second); r.Stats().Events <= uint64(cfg.stuck) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	moved := r.Stats().Events
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("concurrency: Run() = %v, want %v", err, context.Canceled)
	}
	lo, hi := samples[0].heapInuse, samples[0].heapInuse
	for _, s := range samples {
		lo, hi = min(lo, s.heapInuse), max(hi, s.heapInuse)
	}
	fmt.Fprintf(out, "heap in use over %d samples: first %.1f KiB, last %.1f KiB, min %.1f KiB, max %.1f KiB; %d committed in all once released\n",
		len(samples), kib(samples[0].heapInuse), kib(samples[len(samples)-1].heapInuse), kib(lo), kib(hi), moved)
	return nil
}

func kib(b uint64) float64 { return float64(b) / 1024 }
