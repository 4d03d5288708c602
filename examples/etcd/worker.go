package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/resumable-go/resumable/adapters/etcd"
	"github.com/resumable-go/resumable/cursor"
	"github.com/resumable-go/resumable/stream"
)

// work runs the worker until ctx ends, then hands its streams off. It
// returns an error matching ctx's after a handoff.
func work(ctx context.Context, client *clientv3.Client, cfg config, out *lines, st *status, log *zap.Logger) error {
	g, err := etcd.NewGroup(client, cfg.id, etcd.WithTTL(cfg.ttl), etcd.WithLogger(log))
	if err != nil {
		return err
	}
	return g.Run(ctx, cfg.streams, func(ctx context.Context, o *etcd.Owner) error {
		name := o.Stream()
		store, err := etcd.NewOwnerStore(o, cursor.JSON[etcd.Cursor](), etcd.Cursor{})
		if err != nil {
			return err
		}
		r, err := etcd.NewResumer(client, "/streams/"+name+"/", store,
			stream.WithCheckpointEvery(cfg.every),
			stream.WithCheckpointInterval(cfg.interval),
			stream.WithLogger(log.With(zap.String("stream", name))))
		if err != nil {
			return err
		}
		st.printf("owner %s", name)
		err = r.Run(ctx, etcd.Guard(o, func(_ context.Context, ev etcd.Event) error {
			switch {
			case ev.ResyncStart:
				st.printf("resync %s at revision %d", name, ev.Cursor.Revision)
			case !ev.ResyncEnd:
				return out.handled(name, ev.Key, ev.ModRevision)
			}
			return nil
		}))
		switch {
		case errors.Is(err, etcd.ErrNotOwner), errors.Is(err, etcd.ErrCursorChanged):
			st.printf("lost %s: %v", name, oneLine(err))
		case ctx.Err() != nil && errors.Is(err, ctx.Err()):
			st.printf("released %s", name)
		default:
			st.printf("failed %s: %v", name, oneLine(err))
		}
		return err
	})
}

// oneLine joins the lines of a joined error's message.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// lines writes the "handled" lines, one write per line, so that lines of
// concurrent streams never mix and each reaches the output at once.
type lines struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	onLine func(stream string, key []byte) // called after each line (the demo counts)
}

func newLines(w io.Writer, onLine func(stream string, key []byte)) *lines {
	return &lines{w: w, onLine: onLine}
}

// handled prints "handled STREAM KEY MOD_REVISION". It allocates nothing
// once its buffer has grown.
func (l *lines) handled(stream string, key []byte, rev int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := append(l.buf[:0], l.prefix...)
	b = append(b, "handled "...)
	b = append(b, stream...)
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, rev, 10)
	b = append(b, '\n')
	l.buf = b
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("writing the handled line: %w", err)
	}
	if l.onLine != nil {
		l.onLine(stream, key)
	}
	return nil
}

// status writes the ownership changes, one line each.
type status struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func newStatus(w io.Writer, prefix string) *status { return &status{w: w, prefix: prefix} }

func (s *status) printf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, s.prefix+format+"\n", args...)
}
