package stream

import (
	"context"
	"io"

	"github.com/resumable-go/resumable/cursor"
)

// TokenItem is an item of a feed paged by opaque tokens ([Tokens]), with
// the cursor to commit once it is handled.
type TokenItem[T any] struct {
	// Item is the item as fetch returned it.
	Item T
	// Token is the cursor committed after Item: the token of Item's page,
	// or, for the page's last item, the token of the next page.
	Token string
	// Empty marks the one value of an empty page that carries a new token:
	// no Item, only the Token to move to. Its cursor is progress-only, so
	// the handler never sees it.
	Empty bool
}

// Tokens returns a [Source] over an API paged by opaque tokens, and its
// extractor (an item's cursor is its Token), whose
// answer is a page of items and the token of the next page (a
// next_page_token), which belongs to the page, not to an item. Each Open
// calls fetch once with the token to resume after ("" asks for the first page);
// the connection yields the page's items as [TokenItem] values, then ends
// cleanly (io.EOF).
//
// Every item but the last carries its page's own token, and the last one
// carries next: the committed cursor stays on a page until its last item
// was handled, so a stream stopped in the middle of a page fetches that
// page again and nothing is skipped (the items of it already handled are
// delivered again: at least once).
//
// An empty page whose next differs from token moves the cursor to next
// (progress-only: the handler sees nothing) and the next page is fetched at
// once. An empty next, or next equal to token, means there is no later page yet:
// the Resumer polls the same token again after the poll interval
// ([WithPollInterval]). The items of such a page also carry its token, so
// they are delivered again at every poll until the API gives a token past
// them; prefer an API's change or delta token, which it gives at the end of
// its data, or page by an item's own cursor with [Pages].
//
// An error from fetch is an Open error, classified as usual (see
// errclass.FromHTTP for an HTTP status). Tokens starts no goroutine. A nil
// fetch gives a nil Source, which New refuses:
//
//	src, extract := stream.Tokens(fetch)
//	r, err := stream.New(src, extract, store, stream.WithPollInterval(time.Minute))
func Tokens[T any](fetch func(ctx context.Context, token string) (items []T, next string, err error)) (Source[TokenItem[T], string], cursor.Extractor[TokenItem[T], string]) {
	if fetch == nil {
		return nil, tokenCursor[T]
	}
	return tokens[T](fetch), tokenCursor[T]
}

type tokens[T any] func(ctx context.Context, token string) ([]T, string, error)

func (f tokens[T]) Open(ctx context.Context, after string) (Conn[TokenItem[T]], error) {
	items, next, err := f(ctx, after)
	if err != nil {
		return nil, err
	}
	if next == "" {
		next = after
	}
	return &tokenPage[T]{items: items, token: after, next: next}, nil
}

// tokenCursor is the extractor of [Tokens]: an item's Token, and for the
// marker of an empty page that carries a new token, that token as a
// progress-only cursor.
func tokenCursor[T any](it TokenItem[T]) (string, error) {
	if it.Empty {
		return it.Token, cursor.ProgressOnly
	}
	return it.Token, nil
}

// RecvRespectsContext implements [ContextRespecter]: a page's Recv never
// blocks.
func (tokens[T]) RecvRespectsContext() bool { return true }

// tokenPage is one fetched page, delivered item by item.
type tokenPage[T any] struct {
	items       []T
	token, next string
	i           int
}

func (c *tokenPage[T]) Recv(context.Context) (TokenItem[T], error) {
	if len(c.items) == 0 && c.next != c.token && c.i == 0 {
		c.i++ // an empty page with a next token moves the cursor on
		return TokenItem[T]{Token: c.next, Empty: true}, nil
	}
	if c.i >= len(c.items) {
		return TokenItem[T]{}, io.EOF
	}
	it := TokenItem[T]{Item: c.items[c.i], Token: c.token}
	c.i++
	if c.i == len(c.items) {
		it.Token = c.next
	}
	return it, nil
}

// Close does nothing: a page holds no resource, and Close may run
// concurrently with Recv.
func (c *tokenPage[T]) Close() error { return nil }
