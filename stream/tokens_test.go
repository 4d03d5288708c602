package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// tokenPage is one page of a token-paged feed: its items and the token of
// the next page.
type tokenPage struct {
	items []string
	next  string
}

// tokenFetch is a token-paged API over pages (by token), recording each
// fetch: the token asked for and the fake time of the call.
type tokenFetch struct {
	pages map[string]tokenPage
	start time.Time

	mu    sync.Mutex
	calls []tokenCall
	onEnd func(n int) // called with the number of fetches of the token "end" so far
}

type tokenCall struct {
	Token string
	At    time.Duration
}

func (f *tokenFetch) fetch(_ context.Context, token string) ([]string, string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, tokenCall{Token: token, At: time.Since(f.start)})
	ends := 0
	for _, c := range f.calls {
		if c.Token == token {
			ends++
		}
	}
	f.mu.Unlock()
	p, ok := f.pages[token]
	if !ok {
		return nil, "", errclass.Permanent(fmt.Errorf("no page %q", token))
	}
	if f.onEnd != nil && p.next == "" {
		f.onEnd(ends)
	}
	return p.items, p.next, nil
}

func (f *tokenFetch) recorded() []tokenCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]tokenCall(nil), f.calls...)
}

// TestTokensCursors: every item but a page's last carries the page's token,
// the last carries the next token; an empty next token at the end of the
// data polls the same token again after the poll interval.
func TestTokensCursors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &tokenFetch{
			start: time.Now(),
			pages: map[string]tokenPage{
				"":   {items: []string{"a", "b", "c"}, next: "t1"},
				"t1": {items: []string{"d"}, next: "t2"},
				"t2": {next: ""}, // the end of the data, for now
			},
			onEnd: func(n int) {
				if n == 3 {
					cancel()
				}
			},
		}
		store := cursor.NewMemory("")
		src, extract := stream.Tokens(f.fetch)
		r, err := stream.New(src, extract, store,
			stream.WithPollInterval(time.Minute), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		var got []stream.TokenItem[string]
		err = r.Run(ctx, func(_ context.Context, it stream.TokenItem[string]) error {
			got = append(got, it)
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want %v", err, context.Canceled)
		}
		want := []stream.TokenItem[string]{
			{Item: "a", Token: ""}, {Item: "b", Token: ""}, {Item: "c", Token: "t1"},
			{Item: "d", Token: "t2"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("handled items (-want +got):\n%s", diff)
		}
		wantCalls := []tokenCall{
			{Token: "", At: 0}, {Token: "t1", At: 0}, {Token: "t2", At: 0},
			{Token: "t2", At: time.Minute}, {Token: "t2", At: 2 * time.Minute},
		}
		if diff := cmp.Diff(wantCalls, f.recorded()); diff != "" {
			t.Errorf("fetches (-want +got):\n%s", diff)
		}
		if c, _ := store.Load(context.Background()); c != "t2" {
			t.Errorf("stored cursor = %q, want %q", c, "t2")
		}
	})
}

// TestTokensLastPageWithoutToken: a last page with items and no next token
// keeps its own token; it is polled again after the poll interval (never at
// once), and its items are delivered again, as Tokens documents.
func TestTokensLastPageWithoutToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := &tokenFetch{
			start: time.Now(),
			pages: map[string]tokenPage{
				"":   {items: []string{"a"}, next: "t1"},
				"t1": {items: []string{"b", "c"}, next: ""},
			},
			onEnd: func(n int) {
				if n == 3 {
					cancel()
				}
			},
		}
		src, extract := stream.Tokens(f.fetch)
		r, err := stream.New(src, extract, cursor.NewMemory(""),
			stream.WithPollInterval(time.Minute), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		var got []stream.TokenItem[string]
		err = r.Run(ctx, func(_ context.Context, it stream.TokenItem[string]) error {
			got = append(got, it)
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run() = %v, want %v", err, context.Canceled)
		}
		page := []stream.TokenItem[string]{{Item: "b", Token: "t1"}, {Item: "c", Token: "t1"}}
		want := append(append([]stream.TokenItem[string]{{Item: "a", Token: "t1"}}, page...), page...)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("handled items (-want +got):\n%s", diff)
		}
		wantCalls := []tokenCall{{Token: "", At: 0}, {Token: "t1", At: 0}, {Token: "t1", At: time.Minute}, {Token: "t1", At: 2 * time.Minute}}
		if diff := cmp.Diff(wantCalls, f.recorded()); diff != "" {
			t.Errorf("fetches (-want +got):\n%s", diff)
		}
	})
}

var errCrash = errors.New("crash")

// TestTokensCrashMidPage: a stream stopped in the middle of a page resumes,
// in a new Resumer over the same store, with that page from its start:
// nothing is skipped, and the pages before it are not fetched again.
func TestTokensCrashMidPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &tokenFetch{
			start: time.Now(),
			pages: map[string]tokenPage{
				"":   {items: []string{"a", "b"}, next: "p2"},
				"p2": {items: []string{"c", "d", "e"}, next: "p3"},
				"p3": {items: []string{"f"}, next: "p4"},
				"p4": {},
			},
		}
		store := cursor.NewMemory("")
		run := func(crashAt string) ([]string, error) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.onEnd = func(int) { cancel() } // the data is over: stop
			src, extract := stream.Tokens(f.fetch)
			r, err := stream.New(src, extract, store,
				stream.WithPollInterval(time.Minute), stream.WithBackoff(backoff.Constant(0)))
			if err != nil {
				t.Fatal(err)
			}
			var handled []string
			err = r.Run(ctx, func(_ context.Context, it stream.TokenItem[string]) error {
				if it.Item == crashAt {
					return errclass.Permanent(errCrash) // the process dies before handling it
				}
				handled = append(handled, it.Item)
				return nil
			})
			return handled, err
		}

		first, err := run("d")
		if !errors.Is(err, errCrash) {
			t.Fatalf("first Run() = %v, want %v", err, errCrash)
		}
		if c, _ := store.Load(context.Background()); c != "p2" {
			t.Errorf("stored cursor after the crash = %q, want the page's token %q", c, "p2")
		}
		second, err := run("")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("second Run() = %v, want %v", err, context.Canceled)
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, first); diff != "" {
			t.Errorf("first run handled (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"c", "d", "e", "f"}, second); diff != "" {
			t.Errorf("second run handled (-want +got):\n%s", diff)
		}
		var tokens []string
		for _, c := range f.recorded() {
			tokens = append(tokens, c.Token)
		}
		if diff := cmp.Diff([]string{"", "p2", "p2", "p3", "p4"}, tokens); diff != "" {
			t.Errorf("fetched tokens (-want +got):\n%s", diff)
		}
	})
}

func TestTokensFetchError(t *testing.T) {
	errGone := errclass.Permanent(errors.New("410"))
	src, extract := stream.Tokens(func(context.Context, string) ([]int, string, error) { return nil, "", errGone })
	r, err := stream.New(src, extract, cursor.NewMemory(""))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background(), func(context.Context, stream.TokenItem[int]) error { return nil })
	if !errors.Is(err, errGone) {
		t.Errorf("Run() = %v, want %v", err, errGone)
	}
}

func TestTokensNilFetch(t *testing.T) {
	if src, _ := stream.Tokens[int](nil); src != nil {
		t.Errorf("Tokens(nil) = %v, want nil", src)
	}
}

// A feed paged by opaque tokens: the committed cursor stays on a page until
// its last item was handled.
func ExampleTokens() {
	pages := map[string]struct {
		items []string
		next  string
	}{
		"":      {items: []string{"a", "b"}, next: "tok-2"},
		"tok-2": {items: []string{"c"}, next: "tok-3"},
		"tok-3": {}, // nothing more for now
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, extract := stream.Tokens(func(ctx context.Context, token string) ([]string, string, error) {
		p := pages[token]
		if len(p.items) == 0 {
			cancel() // an example stops at the end of the data; a service polls on
		}
		return p.items, p.next, nil
	})
	r, err := stream.New(src, extract, cursor.NewMemory(""))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = r.Run(ctx, func(ctx context.Context, it stream.TokenItem[string]) error {
		fmt.Printf("%s, then commit %q\n", it.Item, it.Token)
		return nil
	})
	fmt.Println("run:", err)
	// Output:
	// a, then commit ""
	// b, then commit "tok-2"
	// c, then commit "tok-3"
	// run: context canceled
}

// Defect 3: Tokens never passes an empty page that carries a next token.
func TestTokensEmptyPageWithNextToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fetches := map[string]int{}
		fetch := func(_ context.Context, token string) ([]string, string, error) {
			mu.Lock()
			fetches[token]++
			mu.Unlock()
			switch token {
			case "":
				return []string{"a", "b"}, "t1", nil
			case "t1":
				return nil, "t2", nil // an empty page, with a next token
			case "t2":
				return []string{"c", "d"}, "t3", nil
			}
			return nil, "", nil // no later page yet
		}
		src, ext := stream.Tokens(fetch)
		r, err := stream.New(src, ext, cursor.NewMemory(""), stream.WithPollInterval(time.Second), stream.WithBackoff(backoff.Constant(0)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var seen []string
		err = r.Run(ctx, func(_ context.Context, it stream.TokenItem[string]) error {
			seen = append(seen, it.Item)
			return nil
		})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run() = %v, want %v", err, context.DeadlineExceeded)
		}
		if fmt.Sprint(seen) != "[a b c d]" {
			t.Errorf("handled %v in a fake minute, want [a b c d]", seen)
		}
		mu.Lock()
		defer mu.Unlock()
		if fetches["t1"] > 2 {
			t.Errorf("the empty page t1 was fetched %d times in a fake minute, want at most 2 (fetches: %v)", fetches["t1"], fetches)
		}
		if got := r.Cursor(); got != "t3" {
			t.Errorf("Cursor() = %q, want %q", got, "t3")
		}
	})
}
