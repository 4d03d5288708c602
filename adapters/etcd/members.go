package etcd

import (
	"context"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/resumable-go/resumable/adapters/etcd/internal/hrw"
)

// members is one member's view of its group: the members alive (their keys
// exist, attached to their leases) and the streams each offers, and from
// them which of its own streams it should run.
type members struct {
	self    string
	streams []string // the streams self offers
	prefix  string   // the members' keys are prefix+name
	client  *clientv3.Client

	mu      sync.Mutex
	offers  map[string][]string // member → the streams it offers
	mine    map[string]bool     // stream → self is the member picked for it
	changed chan struct{}       // closed and replaced at each change of mine
}

func newMembers(client *clientv3.Client, prefix, self string, streams []string) *members {
	return &members{
		self:    self,
		streams: streams,
		prefix:  prefix,
		client:  client,
		offers:  map[string][]string{},
		mine:    map[string]bool{},
		changed: make(chan struct{}),
	}
}

// encodeOffer is the value of a member key: the streams offered, one a line.
func encodeOffer(streams []string) string { return strings.Join(streams, "\n") }

func decodeOffer(v []byte) []string {
	if len(v) == 0 {
		return nil
	}
	return strings.Split(string(v), "\n")
}

// load reads every member key and replaces the view; it returns the
// revision read.
func (m *members) load(ctx context.Context) (int64, error) {
	resp, err := m.client.Get(ctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("etcd: reading the members under %q: %w", m.prefix, err)
	}
	offers := make(map[string][]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		offers[strings.TrimPrefix(string(kv.Key), m.prefix)] = decodeOffer(kv.Value)
	}
	m.mu.Lock()
	m.offers = offers
	m.publish()
	m.mu.Unlock()
	return resp.Header.Revision, nil
}

// follow applies the changes after revision rev to the view until the watch
// fails or ctx ends.
func (m *members) follow(ctx context.Context, rev int64) error {
	conn, err := NewSource(m.client, m.prefix).Open(ctx, Cursor{Revision: rev})
	if err != nil {
		return err
	}
	defer conn.Close()
	for {
		ev, err := conn.Recv(ctx)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(string(ev.Key), m.prefix)
		m.mu.Lock()
		switch ev.Type {
		case Put:
			m.offers[name] = decodeOffer(ev.Value)
			m.publish()
		case Delete:
			delete(m.offers, name)
			m.publish()
		}
		m.mu.Unlock()
	}
}

// publish recomputes which of self's streams self should run, and wakes the
// waiters if that changed. It is called with mu held.
func (m *members) publish() {
	mine := make(map[string]bool, len(m.streams))
	changed := false
	for _, s := range m.streams {
		var candidates []string
		for member, offered := range m.offers {
			for _, o := range offered {
				if o == s {
					candidates = append(candidates, member)
					break
				}
			}
		}
		picked, ok := hrw.Pick(s, candidates)
		mine[s] = ok && picked == m.self
		if mine[s] != m.mine[s] {
			changed = true
		}
	}
	m.mine = mine
	if changed {
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// picked reports whether self should run stream, and returns a channel
// closed at the next change of that answer (or of another stream's).
func (m *members) picked(stream string) (bool, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mine[stream], m.changed
}

// await waits until self should run stream (want true) or should not (want
// false). It reports false when ctx ended first.
func (m *members) await(ctx context.Context, stream string, want bool) bool {
	for ctx.Err() == nil {
		ok, changed := m.picked(stream)
		if ok == want {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
	return false
}
