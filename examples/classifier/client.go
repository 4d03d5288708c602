package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// This file is the client side: the API's Source, its typed error, the token
// it refreshes, and the classifier that reads them.

// Item is one entry of the API's changelog: Delta is added to a running
// total. An item made by a resync is a Snapshot: Total replaces the running
// total as of Seq.
type Item struct {
	Seq      int64 `json:"seq"`
	Delta    int64 `json:"delta,omitempty"`
	Snapshot bool  `json:"snapshot,omitempty"`
	Total    int64 `json:"total,omitempty"`
}

// StatusError is an HTTP answer other than the one asked for. The
// classifier reads it with errclass.As.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// RetryAfter is the delay from the Retry-After header; zero when absent.
	RetryAfter time.Duration
	// FreshToken reports that the request carried a token fetched for it,
	// so that a 401 means the credentials themselves are refused.
	FreshToken bool
}

// Error returns "api: 429 Too Many Requests".
func (e *StatusError) Error() string {
	return fmt.Sprintf("api: %d %s", e.Code, http.StatusText(e.Code))
}

// ErrMalformed is matched by the error a connection returns when a line of
// the stream is not an Item: a bug on one side or the other, which
// reconnecting would not fix.
var ErrMalformed = errors.New("api: the server sent a malformed item")

// Tokens hands out the API's bearer token, fetching a new one when there is
// none or when it was marked stale. It is safe for concurrent use.
type Tokens struct {
	url    string
	secret string
	client *http.Client

	stale     atomic.Bool
	refreshes atomic.Int64
	mu        sync.Mutex
	token     string
}

// MarkStale makes the next Get fetch a new token. It does not block, so a
// classifier may call it.
func (t *Tokens) MarkStale() { t.stale.Store(true) }

// Refreshes returns how many tokens were fetched after the first one.
func (t *Tokens) Refreshes() int64 { return t.refreshes.Load() }

// Get returns the token, fetching one first if needed; fresh reports a token
// fetched by this call.
func (t *Tokens) Get(ctx context.Context) (token string, fresh bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && !t.stale.Load() {
		return t.token, false, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, nil)
	if err != nil {
		return "", false, errclass.Permanent(err)
	}
	req.Header.Set("X-Client-Secret", t.secret)
	var body struct{ Token string }
	if err := do(t.client, req, true, &body); err != nil { // a 401 here: the secret is refused
		return "", false, fmt.Errorf("api: refreshing the token: %w", err)
	}
	if t.token != "" {
		t.refreshes.Add(1)
	}
	t.token = body.Token
	t.stale.Store(false)
	return t.token, true, nil
}

// API is the client of the changelog API, and a stream.Source of its items
// whose cursor is the last Seq handled.
type API struct {
	base   string
	client *http.Client
	tokens *Tokens
}

var _ stream.Source[Item, int64] = (*API)(nil)

// Open asks for the items after after. Its failures are *StatusError values
// (and the transport's errors), left for the classifier to judge.
func (a *API) Open(ctx context.Context, after int64) (stream.Conn[Item], error) {
	reqCtx, cancel := context.WithCancel(ctx)
	resp, err := a.get(reqCtx, "/v1/events?after="+strconv.FormatInt(after, 10), "application/x-ndjson")
	if err != nil {
		cancel()
		if errors.Is(err, errNoContent) {
			return nil, stream.ErrEndOfStream
		}
		return nil, err
	}
	return &conn{body: resp.Body, cancel: cancel, dec: json.NewDecoder(resp.Body)}, nil
}

// Snapshot returns the API's state as one snapshot Item.
func (a *API) Snapshot(ctx context.Context) (Item, error) {
	resp, err := a.get(ctx, "/v1/snapshot", "application/json")
	if err != nil {
		return Item{}, err
	}
	defer resp.Body.Close()
	var it Item
	if err := json.NewDecoder(resp.Body).Decode(&it); err != nil || !it.Snapshot {
		return Item{}, fmt.Errorf("%w: snapshot %+v: %v", ErrMalformed, it, err)
	}
	return it, nil
}

// errNoContent is get's answer to 204 No Content.
var errNoContent = errors.New("api: no content")

// get sends an authorised GET and returns a 200 response of content type
// want, or an error; the caller closes the body.
func (a *API) get(ctx context.Context, path, want string) (*http.Response, error) {
	token, fresh, err := a.tokens.Get(ctx)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
	if err != nil {
		return nil, errclass.Permanent(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNoContent:
		resp.Body.Close()
		return nil, errNoContent
	case resp.StatusCode != http.StatusOK:
		drain(resp)
		return nil, statusError(resp, fresh)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != want {
		drain(resp)
		return nil, errclass.Permanent(fmt.Errorf("api: got Content-Type %q, want %q", mt, want))
	}
	return resp, nil
}

// do sends req and decodes a 200 JSON answer into v.
func do(c *http.Client, req *http.Request, fresh bool, v any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return statusError(resp, fresh)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

func statusError(resp *http.Response, fresh bool) *StatusError {
	e := &StatusError{Code: resp.StatusCode, FreshToken: fresh}
	if n, err := strconv.ParseUint(strings.TrimSpace(resp.Header.Get("Retry-After")), 10, 32); err == nil {
		e.RetryAfter = time.Duration(n) * time.Second
	}
	return e
}

// drain reads a little of an unwanted body, so that the connection can be
// reused, and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}

// conn is one response's worth of items, one JSON object per line.
type conn struct {
	body      io.Closer
	cancel    context.CancelFunc
	dec       *json.Decoder
	closeOnce sync.Once
}

// Recv returns the next item: io.EOF when the server ended the page between
// items, io.ErrUnexpectedEOF when it was cut inside one, an error matching
// ErrMalformed for a line that is not an item.
func (c *conn) Recv(ctx context.Context) (Item, error) {
	if err := ctx.Err(); err != nil {
		return Item{}, err
	}
	stop := context.AfterFunc(ctx, c.cancel)
	defer stop()
	var it Item
	err := c.dec.Decode(&it)
	switch {
	case err == nil:
		return it, nil
	case ctx.Err() != nil:
		return Item{}, ctx.Err()
	case err == io.EOF:
		return Item{}, io.EOF
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return Item{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return Item{}, fmt.Errorf("api: reading items: %w", err)
}

// Close ends the request, unblocking a pending Recv. It may be called more
// than once.
func (c *conn) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.body.Close()
	})
	return nil
}

// refreshOn401 is the classifier's custom rule: a 401 means the token
// expired, so mark it stale and retry; the next Open fetches a new one. A
// 401 on a token fetched for that very request means the credentials are
// refused: give up.
//
// The refresh itself is left to Open, not done here: a Classifier must not
// block and has no context to honour cancellation with, while Open has
// both, and a failed refresh there is classified like any other failure.
type refreshOn401 struct{ tokens *Tokens }

// Classify implements errclass.Classifier.
func (r refreshOn401) Classify(err error) errclass.Decision {
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		return errclass.Decision{}
	}
	if se.FreshToken {
		return errclass.Decision{Action: errclass.Fail}
	}
	r.tokens.MarkStale()
	return errclass.Decision{Action: errclass.Retry}
}

// byStatus is the rule for the other HTTP status codes.
func byStatus(e *StatusError) errclass.Decision {
	switch c := e.Code; {
	case c == http.StatusGone:
		return errclass.Decision{Action: errclass.Expired} // the cursor was compacted away
	case c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable:
		return errclass.Decision{Action: errclass.Retry, After: e.RetryAfter}
	case c == http.StatusRequestTimeout || c >= 500:
		return errclass.Decision{Action: errclass.Retry}
	case c >= 400:
		return errclass.Decision{Action: errclass.Fail}
	}
	return errclass.Decision{}
}

// NewClassifier returns the API's classifier: the first link that has an
// opinion decides, and an error none of them knows (a refused connection, a
// reset) falls through to errclass.Default, which retries it.
func NewClassifier(tokens *Tokens) errclass.Classifier {
	return errclass.Chain(
		errclass.Markers(),    // what the code that made an error marked (Permanent) stands
		refreshOn401{tokens},  // custom: 401 → refresh the token, retry
		errclass.As(byStatus), // 410 → resync; 429/503 → retry after Retry-After; 5xx → retry; 4xx → fail
		errclass.Is(ErrMalformed, errclass.Decision{Action: errclass.Fail}),         // reconnecting would not fix it
		errclass.Is(io.ErrUnexpectedEOF, errclass.Decision{Action: errclass.Retry}), // a page cut short
	)
}
