package cursor

import (
	"context"
	"errors"
	"sync"
)

// Extractor returns the cursor of event: the position a source can resume
// strictly after. An error other than [ProgressOnly] stops the stream and is
// returned to the caller of Run, wrapped; the event is then not delivered.
//
// An Extractor is called from one goroutine at a time, once per event.
type Extractor[T, C any] func(event T) (C, error)

// ProgressOnly is returned by an [Extractor], together with a valid cursor,
// for an event that only moves the stream forward and carries nothing for the
// handler: a Kubernetes bookmark, an etcd progress notification. The stream
// commits the cursor and does not deliver the event. Like [io/fs.SkipDir] it
// is a signal, not a failure; compare with errors.Is.
//
//lint:ignore ST1012 a signal like fs.SkipDir, not a failure; the name is part of the API
var ProgressOnly = errors.New("cursor: progress-only event")

// Store keeps the cursor to resume after. The stream calls Load once when it
// starts and Save after handled events (how often depends on the stream's
// checkpoint options). Implementations must be safe for concurrent use.
//
// A Save that fails must leave the previously saved cursor in place: the
// cursor a Store returns from Load is never ahead of what was handled.
type Store[C any] interface {
	// Load returns the cursor to resume after: the initial one when nothing
	// was saved yet.
	Load(ctx context.Context) (C, error)
	// Save records c as the cursor to resume after.
	Save(ctx context.Context, c C) error
}

// HandlerCommitter is the optional interface of a [Store] whose cursor is
// written inside the handler's own transaction (postgres.Transactional), so
// that an event's effects and its cursor commit together. CommitsInHandler
// reporting true makes a Resumer refuse WithConcurrency above 1:
// transactions finishing out of order would store a cursor beyond an
// unfinished event. A Store wrapping another passes on the wrapped answer.
// It must be safe to call from any goroutine.
type HandlerCommitter interface {
	CommitsInHandler() bool
}

// Memory is a [Store] that keeps the cursor in memory. It is safe for
// concurrent use. Its zero value holds the zero cursor.
type Memory[C any] struct {
	mu sync.Mutex
	c  C
}

// NewMemory returns a Memory store whose Load returns initial until the first
// Save.
func NewMemory[C any](initial C) *Memory[C] {
	return &Memory[C]{c: initial}
}

// Load returns the last saved cursor, or the initial one. It never fails
// except when ctx is already done.
func (m *Memory[C]) Load(ctx context.Context) (C, error) {
	if err := ctx.Err(); err != nil {
		var zero C
		return zero, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c, nil
}

// Save records c. It never fails; it ignores ctx so that a final save after
// cancellation still lands.
func (m *Memory[C]) Save(_ context.Context, c C) error {
	m.mu.Lock()
	m.c = c
	m.mu.Unlock()
	return nil
}
