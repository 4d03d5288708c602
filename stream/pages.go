package stream

import (
	"context"
	"io"
)

// Pages returns a [Source] over a page-fetching function, for a polled API
// (GET /changes?after=N answering up to a page of items). Each Open calls
// fetch once with the cursor to resume after: the committed one, or under
// [WithConcurrency] the last item read while earlier ones still run. The
// connection yields the page's items, then ends cleanly (io.EOF), so the
// Resumer opens again after the last item at once. An empty page is an empty clean end, after which the
// Resumer waits the poll interval ([WithPollInterval]). An error from fetch
// is an Open error, classified as usual. Pages starts no goroutine. A nil
// fetch gives a nil Source, which New refuses.
func Pages[T, C any](fetch func(ctx context.Context, after C) ([]T, error)) Source[T, C] {
	if fetch == nil {
		return nil
	}
	return pages[T, C](fetch)
}

type pages[T, C any] func(ctx context.Context, after C) ([]T, error)

func (p pages[T, C]) Open(ctx context.Context, after C) (Conn[T], error) {
	items, err := p(ctx, after)
	if err != nil {
		return nil, err
	}
	return &page[T]{items: items}, nil
}

// RecvRespectsContext implements [ContextRespecter]: a page's Recv never
// blocks.
func (pages[T, C]) RecvRespectsContext() bool { return true }

// page is one fetched page, delivered item by item.
type page[T any] struct {
	items []T
	next  int
}

func (c *page[T]) Recv(context.Context) (T, error) {
	if c.next >= len(c.items) {
		var zero T
		return zero, io.EOF
	}
	ev := c.items[c.next]
	c.next++
	return ev, nil
}

// Close does nothing: a page holds no resource, and Close may run
// concurrently with Recv.
func (c *page[T]) Close() error { return nil }
