package interop_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	gosse "github.com/tmaxmax/go-sse"

	"github.com/resumable-go/resumable/adapters/sse"
	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// TestGoSSEServer runs the Source against tmaxmax/go-sse's server (Joe with
// a FiniteReplayer, which replays the events after Last-Event-ID) while the
// connections are cut at random byte offsets and the events are published
// live: every event arrives exactly once, in order, with its data whole.
func TestGoSSEServer(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			const total = 1000
			replayer, err := gosse.NewFiniteReplayer(total+1, false)
			if err != nil {
				t.Fatal(err)
			}
			joe := &gosse.Joe{Replayer: replayer}
			server := &gosse.Server{Provider: joe}
			// Shut Joe down after ts.Close has waited for the handlers: a
			// handler that Shutdown releases returns while Joe may still be
			// writing to its response (a data race inside go-sse).
			defer func() {
				if err := server.Shutdown(context.Background()); err != nil {
					t.Errorf("Shutdown() = %v", err)
				}
			}()
			ts := cuttingServer(server, seed, 3000, 0)
			defer ts.Close()

			// Event 0 marks the start: the client resumes after it, so the
			// replayer has a Last-Event-ID to replay from even before the
			// first event arrived.
			publish := func(n int) error {
				m := &gosse.Message{ID: gosse.ID(strconv.Itoa(n)), Type: gosse.Type("tick")}
				m.AppendData(fmt.Sprintf("event %d", n), "line 2")
				return server.Publish(m)
			}
			if err := publish(0); err != nil {
				t.Fatal(err)
			}
			published := make(chan error, 1)
			go func() {
				tick := time.NewTicker(100 * time.Microsecond) // pacing, so events go out live too
				defer tick.Stop()
				for n := 1; n <= total; n++ {
					if err := publish(n); err != nil {
						published <- err
						return
					}
					<-tick.C
				}
				published <- nil
			}()

			src := &sse.Source{URL: ts.URL, Client: ts.Client()}
			r, err := stream.New(src, sse.EventID, cursor.NewMemory("0"),
				stream.WithBackoff(backoff.Constant(time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			next := 1
			err = r.Run(context.Background(), func(_ context.Context, ev sse.Event) error {
				want := sse.Event{ID: strconv.Itoa(next), Type: "tick", Data: fmt.Sprintf("event %d\nline 2", next)}
				if ev != want {
					return fmt.Errorf("event %+v arrived, want %+v", ev, want)
				}
				if next++; next > total {
					return stream.ErrStop
				}
				return nil
			})
			if err != nil || next <= total {
				t.Errorf("Run() = %v after %d events, want nil after %d", err, next-1, total)
			}
			if err := <-published; err != nil {
				t.Errorf("Publish() = %v", err)
			}
			st := r.Stats()
			t.Logf("%d events over %d connections", total, st.Opens)
			if st.Opens < 5 {
				t.Errorf("Stats().Opens = %d, want the cuts to have forced many reconnects", st.Opens)
			}
		})
	}
}
