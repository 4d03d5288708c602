package streamtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

// waitLimit bounds every wait in these tests; it is never a timing assertion.
const waitLimit = 10 * time.Second

func letters(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("e%d", i+1)
	}
	return out
}

func seqs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// drainConn reads c until its first error, at most limit events.
func drainConn(t *testing.T, c stream.Conn[streamtest.Event[string]], limit int) ([]int64, error) {
	t.Helper()
	var got []int64
	for range limit {
		e, err := c.Recv(context.Background())
		if err != nil {
			return got, err
		}
		if want := fmt.Sprintf("e%d", e.Seq); e.Value != want {
			t.Errorf("event %d has value %q, want %q", e.Seq, e.Value, want)
		}
		got = append(got, e.Seq)
	}
	t.Fatalf("connection still delivering after %d events", limit)
	return got, nil
}

func TestSourcePlaysEachStep(t *testing.T) {
	errCustom := errors.New("connection reset by peer")
	retry := errclass.Decision{Action: errclass.Retry}
	tests := []struct {
		name         string
		end          streamtest.EndOfLog
		after        int64
		step         streamtest.Step
		wantOpenErr  error // nil: Open succeeds
		wantSeqs     []int64
		wantErr      error // what ends the connection (or Open's error)
		wantDecision errclass.Decision
	}{
		{name: "deliver to the end of the log", wantSeqs: seqs(1, 5), wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "deliver after a cursor", after: 3, wantSeqs: seqs(4, 5), wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "deliver at the end of the log", after: 5, wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "deliver ignores K", step: streamtest.Step{Kind: streamtest.Deliver, K: 1}, wantSeqs: seqs(1, 5), wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "end of log as EOF", end: streamtest.EOF, wantSeqs: seqs(1, 5), wantErr: io.EOF, wantDecision: retry},
		{name: "fail open", step: streamtest.Step{Kind: streamtest.FailOpen}, wantOpenErr: streamtest.ErrInjected, wantErr: streamtest.ErrInjected, wantDecision: retry},
		{name: "fail open with an error", step: streamtest.Step{Kind: streamtest.FailOpen, Err: errCustom}, wantOpenErr: errCustom, wantErr: errCustom, wantDecision: retry},
		{name: "end after 2", step: streamtest.Step{Kind: streamtest.EndAfter, K: 2}, wantSeqs: seqs(1, 2), wantErr: io.EOF, wantDecision: retry},
		{name: "end after 0", step: streamtest.Step{Kind: streamtest.EndAfter}, wantErr: io.EOF, wantDecision: retry},
		{name: "end after more than the log", step: streamtest.Step{Kind: streamtest.EndAfter, K: 9}, wantSeqs: seqs(1, 5), wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "break after 3", step: streamtest.Step{Kind: streamtest.BreakAfter, K: 3}, wantSeqs: seqs(1, 3), wantErr: streamtest.ErrInjected, wantDecision: retry},
		{name: "break with an error", step: streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errCustom}, wantSeqs: seqs(1, 1), wantErr: errCustom, wantDecision: retry},
		{name: "break with a permanent error", step: streamtest.Step{Kind: streamtest.BreakAfter, K: 1, Err: errclass.Permanent(errCustom)}, wantSeqs: seqs(1, 1), wantErr: errCustom, wantDecision: errclass.Decision{Action: errclass.Fail}},
		{name: "server delay at open", step: streamtest.Step{Kind: streamtest.DelayAfter, Delay: time.Second}, wantOpenErr: streamtest.ErrInjected, wantErr: streamtest.ErrInjected, wantDecision: errclass.Decision{Action: errclass.Retry, After: time.Second}},
		{name: "server delay after 2", step: streamtest.Step{Kind: streamtest.DelayAfter, K: 2, Delay: time.Minute, Err: errCustom}, wantSeqs: seqs(1, 2), wantErr: errCustom, wantDecision: errclass.Decision{Action: errclass.Retry, After: time.Minute}},
		{name: "expired at open", step: streamtest.Step{Kind: streamtest.ExpireAfter}, wantOpenErr: errclass.ErrExpired, wantErr: streamtest.ErrInjected, wantDecision: errclass.Decision{Action: errclass.Expired}},
		{name: "expired after 1", after: 2, step: streamtest.Step{Kind: streamtest.ExpireAfter, K: 1, Err: errCustom}, wantSeqs: seqs(3, 3), wantErr: errCustom, wantDecision: errclass.Decision{Action: errclass.Expired}},
		{name: "end of stream after 2", step: streamtest.Step{Kind: streamtest.EndStreamAfter, K: 2}, wantSeqs: seqs(1, 2), wantErr: stream.ErrEndOfStream, wantDecision: retry},
		{name: "cursor past the log", after: 6, wantOpenErr: errors.New("any"), wantDecision: errclass.Decision{Action: errclass.Fail}},
		{name: "negative cursor", after: -1, wantOpenErr: errors.New("any"), wantDecision: errclass.Decision{Action: errclass.Fail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := streamtest.NewSource(letters(5), tt.step)
			src.SetEndOfLog(tt.end)
			c, err := src.Open(context.Background(), tt.after)
			var got []int64
			if tt.wantOpenErr != nil {
				if err == nil || c != nil {
					t.Fatalf("Open() = %v, %v, want nil and an error", c, err)
				}
				if tt.wantErr != nil && (!errors.Is(err, tt.wantOpenErr) || !errors.Is(err, tt.wantErr)) {
					t.Errorf("Open() = %v, want an error matching %v and %v", err, tt.wantOpenErr, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Open() = %v, want a connection", err)
				}
				got, err = drainConn(t, c, 100)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("Recv() = %v, want %v", err, tt.wantErr)
				}
				if err := c.Close(); err != nil {
					t.Errorf("Close() = %v", err)
				}
			}
			if diff := cmp.Diff(tt.wantSeqs, got); diff != "" {
				t.Errorf("delivered (-want +got):\n%s", diff)
			}
			if got := errclass.Default().Classify(err); got != tt.wantDecision {
				t.Errorf("Default().Classify(%v) = %v, want %v", err, got, tt.wantDecision)
			}
			if live := src.Live(); live != 0 {
				t.Errorf("Live() = %d, want 0", live)
			}
			want := []streamtest.Open{{After: tt.after, Step: tt.step}}
			if diff := cmp.Diff(want, src.Opens(), cmpOpens); diff != "" {
				t.Errorf("Opens() (-want +got):\n%s", diff)
			}
		})
	}
}

// cmpOpens compares Open records without their times and errors by
// identity, which is what a script holds.
var cmpOpens = cmp.Options{
	cmp.Comparer(func(a, b error) bool { return a == b }),
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".At" }, cmp.Ignore()),
}

func TestScriptIsPlayedOneStepPerOpen(t *testing.T) {
	script := []streamtest.Step{
		{Kind: streamtest.FailOpen},
		{Kind: streamtest.BreakAfter, K: 1},
		{Kind: streamtest.EndAfter, K: 2},
		{Kind: streamtest.BreakAfter, K: 4},
	}
	src := streamtest.NewSource(letters(5), script...)
	script[0].Kind = streamtest.EndStreamAfter // the Source keeps its own copy
	ctx := context.Background()

	if _, err := src.Open(ctx, 0); !errors.Is(err, streamtest.ErrInjected) {
		t.Fatalf("Open() = %v, want %v", err, streamtest.ErrInjected)
	}
	c1, err := src.Open(ctx, 0)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	c2, err := src.Open(ctx, 0) // c1 is still open
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if got := src.Live(); got != 2 {
		t.Errorf("Live() = %d, want 2", got)
	}
	script[0].Kind = streamtest.FailOpen // as it was given
	for i, o := range src.Opens() {
		if o.Step.Kind != script[i].Kind || o.Step.K != script[i].K {
			t.Errorf("Open %d played %v, want %v", i, o.Step, script[i])
		}
	}
	c1.Close()
	c1.Close() // more than once is fine
	if _, err := c1.Recv(ctx); !isClosed(err) {
		t.Errorf("Recv() after Close = %v, want %q", err, closedText)
	}
	if got, err := drainConn(t, c2, 10); !errors.Is(err, io.EOF) || len(got) != 2 {
		t.Errorf("second connection delivered %v, %v, want 2 events and %v", got, err, io.EOF)
	}
	c2.Close()
	if got := src.Live(); got != 0 {
		t.Errorf("Live() = %d, want 0", got)
	}

	// An Open on a dead context records and consumes nothing.
	dead, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Open(dead, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Open(cancelled) = %v, want %v", err, context.Canceled)
	}
	c3, err := src.Open(ctx, 3)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	c3.Close()

	want := []streamtest.Open{
		{After: 0, Step: script[0], Live: 0},
		{After: 0, Step: script[1], Live: 0},
		{After: 0, Step: script[2], Live: 1},
		{After: 3, Step: script[3], Live: 0},
	}
	want[0].Step.Kind = streamtest.FailOpen
	got := src.Opens()
	if diff := cmp.Diff(want, got, cmpOpens); diff != "" {
		t.Errorf("Opens() (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].At.Before(got[i-1].At) {
			t.Errorf("Open %d at %v is before Open %d at %v", i, got[i].At, i-1, got[i-1].At)
		}
	}
}

func TestBlockAfterIgnoresContextUntilClose(t *testing.T) {
	src := streamtest.NewSource(letters(5), streamtest.Step{Kind: streamtest.BlockAfter, K: 1})
	c, err := src.Open(context.Background(), 0)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	if e, err := c.Recv(context.Background()); err != nil || e.Seq != 1 {
		t.Fatalf("Recv() = %v, %v, want event 1", e, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Recv ignores it
	done := make(chan error, 1)
	go func() {
		_, err := c.Recv(ctx)
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("AwaitBlocked() = %v, want nil", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Recv() = %v on a cancelled context, want it blocked until Close", err)
	default:
	}
	c.Close()
	select {
	case err := <-done:
		if !isClosed(err) {
			t.Errorf("Recv() = %v, want %q", err, closedText)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not unblock Recv")
	}
	if blocked(src) {
		t.Error("a call is still blocked after Recv returned, want none")
	}
	if got := src.Live(); got != 0 {
		t.Errorf("Live() = %d, want 0", got)
	}
}

func TestBlockOpenHonoursContext(t *testing.T) {
	src := streamtest.NewSource(letters(5), streamtest.Step{Kind: streamtest.BlockOpen})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		c, err := src.Open(ctx, 0)
		if c != nil {
			c.Close()
		}
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("AwaitBlocked() = %v, want nil", err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Open() = %v, want %v", err, context.Canceled)
		}
	case <-time.After(waitLimit):
		t.Fatal("Open did not return after its context was cancelled")
	}
	if blocked(src) {
		t.Error("a call is still blocked after Open returned, want none")
	}
	if got := len(src.Opens()); got != 1 {
		t.Errorf("%d Opens recorded, want 1", got)
	}
}

func TestAwaitBlockedEndsWithItsContext(t *testing.T) {
	src := streamtest.NewSource(letters(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.AwaitBlocked(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("AwaitBlocked() = %v, want %v", err, context.Canceled)
	}
}

func TestWaitAtEndOfLogWakesOnAppend(t *testing.T) {
	src := streamtest.NewSource(letters(2))
	src.SetEndOfLog(streamtest.Wait)
	c, err := src.Open(context.Background(), 0)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	defer c.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), waitLimit)
	defer wcancel()

	recv := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() {
			e, err := c.Recv(ctx)
			if err == nil && e.Seq != 3 {
				err = fmt.Errorf("got event %d, want 3", e.Seq)
			}
			done <- err
		}()
		return done
	}
	for range 2 {
		if _, err := c.Recv(context.Background()); err != nil {
			t.Fatalf("Recv() = %v", err)
		}
	}
	done := recv(context.Background())
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("AwaitBlocked() = %v", err)
	}
	src.Append("e3")
	if err := <-done; err != nil {
		t.Fatalf("Recv() after Append = %v, want event 3", err)
	}

	// Waiting honours ctx.
	ctx, cancel := context.WithCancel(context.Background())
	done = recv(ctx)
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("AwaitBlocked() = %v", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Recv() = %v, want %v", err, context.Canceled)
	}
	// And Close.
	done = recv(context.Background())
	if err := src.AwaitBlocked(wctx); err != nil {
		t.Fatalf("AwaitBlocked() = %v", err)
	}
	c.Close()
	if err := <-done; !isClosed(err) {
		t.Errorf("Recv() = %v, want %q", err, closedText)
	}
}

func TestAppendDoesNotWriteIntoTheCallersLog(t *testing.T) {
	log := make([]string, 2, 10)
	log[0], log[1] = "e1", "e2"
	a := streamtest.NewSource(log)
	b := streamtest.NewSource(log)
	a.Append("from a")
	b.Append("from b")
	if got := log[:3][2]; got != "" {
		t.Errorf("the caller's spare capacity holds %q, want it untouched", got)
	}
	for _, tt := range []struct {
		name string
		src  *streamtest.Source[string]
		want string
	}{
		{name: "a", src: a, want: "from a"},
		{name: "b", src: b, want: "from b"},
	} {
		c, err := tt.src.Open(context.Background(), 2)
		if err != nil {
			t.Fatalf("%s: Open() = %v", tt.name, err)
		}
		if e, err := c.Recv(context.Background()); err != nil || e.Value != tt.want {
			t.Errorf("%s: Recv() = %v, %v, want %q", tt.name, e, err, tt.want)
		}
		c.Close()
	}
}

func TestRandomScript(t *testing.T) {
	const seed = 42
	draw := func(kinds ...streamtest.Kind) []streamtest.Step {
		return streamtest.RandomScript(rand.New(rand.NewPCG(seed, seed)), 1000, 7, time.Millisecond, kinds...)
	}
	a, b := draw(), draw()
	if diff := cmp.Diff(a, b, cmpOpens); diff != "" {
		t.Fatalf("two scripts from seed %d differ (-first +second):\n%s", seed, diff)
	}
	counts := map[streamtest.Kind]int{}
	for _, st := range a {
		counts[st.Kind]++
		if st.K < 0 || st.K > 7 {
			t.Errorf("step %v has K outside [0, 7]", st)
		}
		if st.Delay < 0 || st.Delay > time.Millisecond || (st.Kind != streamtest.DelayAfter && st.Delay != 0) {
			t.Errorf("step %v has a delay outside [0, 1ms]", st)
		}
		if st.Err != nil {
			t.Errorf("step %v names an error, want ErrInjected", st)
		}
	}
	wantKinds := []streamtest.Kind{streamtest.FailOpen, streamtest.EndAfter, streamtest.BreakAfter, streamtest.DelayAfter, streamtest.ExpireAfter}
	for _, k := range wantKinds {
		if counts[k] == 0 {
			t.Errorf("no %v step in 1000 draws of seed %d", k, seed)
		}
	}
	if len(counts) != len(wantKinds) {
		t.Errorf("kinds drawn by default = %v, want only %v", counts, wantKinds)
	}
	for _, st := range draw(streamtest.BlockAfter) {
		if st.Kind != streamtest.BlockAfter {
			t.Fatalf("drew %v, want only %v", st, streamtest.BlockAfter)
		}
	}
	if got := streamtest.RandomScript(rand.New(rand.NewPCG(1, 2)), -1, 3, 0); len(got) != 0 {
		t.Errorf("RandomScript(n = -1) = %v, want none", got)
	}
}

func TestStepString(t *testing.T) {
	tests := []struct {
		name string
		step streamtest.Step
		want string
	}{
		{name: "deliver", step: streamtest.Step{}, want: "deliver(0)"},
		{name: "fail open", step: streamtest.Step{Kind: streamtest.FailOpen}, want: "fail-open(streamtest: injected failure)"},
		{name: "end", step: streamtest.Step{Kind: streamtest.EndAfter, K: 3}, want: "end-after(3)"},
		{name: "break", step: streamtest.Step{Kind: streamtest.BreakAfter, K: 2}, want: "break-after(2)"},
		{name: "delay", step: streamtest.Step{Kind: streamtest.DelayAfter, K: 1, Delay: time.Second}, want: "delay-after(1, 1s)"},
		{name: "expire", step: streamtest.Step{Kind: streamtest.ExpireAfter}, want: "expire-after(0)"},
		{name: "block", step: streamtest.Step{Kind: streamtest.BlockAfter, K: 4}, want: "block-after(4)"},
		{name: "end stream", step: streamtest.Step{Kind: streamtest.EndStreamAfter, K: 5}, want: "end-stream-after(5)"},
		{name: "block open", step: streamtest.Step{Kind: streamtest.BlockOpen}, want: "block-open"},
		{name: "unknown kind", step: streamtest.Step{Kind: 200}, want: "kind(200)(0)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.step.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestConcurrentUse is for the race detector: Opens, Recvs, Closes, Appends
// and reads of the record from many goroutines.
func TestConcurrentUse(t *testing.T) {
	src := streamtest.NewSource(letters(50), streamtest.RandomScript(rand.New(rand.NewPCG(7, 7)), 40, 10, 0)...)
	src.SetEndOfLog(streamtest.EOF)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				c, err := src.Open(context.Background(), int64(g+i))
				if err != nil {
					continue
				}
				for {
					if _, err := c.Recv(context.Background()); err != nil {
						break
					}
				}
				c.Close()
				_, _, _ = src.Live(), src.Opens(), blocked(src)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 50 {
			src.Append("more")
			_ = src.Opens()
		}
	}()
	wg.Wait()
	if got := src.Live(); got != 0 {
		t.Errorf("Live() = %d, want 0", got)
	}
	if got := len(src.Opens()); got != 8*20 {
		t.Errorf("%d Opens recorded, want %d", got, 8*20)
	}
}

// blocked reports whether a call of src is blocked right now: AwaitBlocked
// on an ended context returns nil only then.
func blocked[T any](src *streamtest.Source[T]) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return src.AwaitBlocked(ctx) == nil
}

// closedText is the message of Recv's error on a closed connection.
const closedText = "streamtest: connection closed"

// isClosed reports whether err is Recv's error on a closed connection.
func isClosed(err error) bool { return err != nil && err.Error() == closedText }
