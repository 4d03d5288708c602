package k8s

import (
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
)

type objKey struct {
	namespace, name string
}

type objState struct {
	uid types.UID
	rv  string
	gen uint32 // the resync that last saw it (listed or delivered)
}

// tracker remembers every object delivered and not deleted, for
// WithResyncDiff. Only the watcher's goroutine uses it.
type tracker struct {
	objs       map[objKey]objState
	namespaces map[string]string // interned: one copy per namespace, not per object
	gen        uint32
}

func newTracker() *tracker {
	return &tracker{objs: make(map[objKey]objState), namespaces: make(map[string]string)}
}

// seen is read before the event is handed over: the consumer owns it after.
type seen struct {
	typ watch.EventType
	key objKey
	uid types.UID
	rv  string
}

// read returns what record needs; ok is false for an event that changes
// nothing.
func read(ev watch.Event) (s seen, ok bool) {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted:
	default:
		return seen{}, false
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return seen{}, false
	}
	return seen{typ: ev.Type, key: objKey{m.GetNamespace(), m.GetName()}, uid: m.GetUID(), rv: m.GetResourceVersion()}, true
}

func (t *tracker) record(s seen) {
	if s.typ == watch.Deleted {
		delete(t.objs, s.key)
		return
	}
	// An assignment stores the key given (its strings), so the namespace is
	// interned every time.
	s.key.namespace = t.intern(s.key.namespace)
	t.objs[s.key] = objState{uid: s.uid, rv: s.rv, gen: t.gen}
}

func (t *tracker) intern(ns string) string {
	if ns == "" {
		return ""
	}
	if s, ok := t.namespaces[ns]; ok {
		return s
	}
	t.namespaces[ns] = ns
	return ns
}

// begin starts a resync's comparison: nothing is listed yet.
func (t *tracker) begin() { t.gen++ }

// listed delivers the difference between a listed object and what was
// delivered; events other than Added and Modified are ignored.
func (t *tracker) listed(ev watch.Event, kind objectKind, deliver func(watch.Event) error) error {
	if ev.Type != watch.Added && ev.Type != watch.Modified {
		return nil
	}
	m, err := meta.Accessor(ev.Object)
	if err != nil {
		return errclass.Permanent(fmt.Errorf("k8s: the ResyncFunc emitted a %s event whose object (%T) has no object metadata to compare: %w", ev.Type, ev.Object, err))
	}
	key := objKey{t.intern(m.GetNamespace()), m.GetName()}
	st, ok := t.objs[key]
	if !ok {
		return deliver(watch.Event{Type: watch.Added, Object: ev.Object})
	}
	// Listed: the sweep leaves it alone whatever the outcome below.
	st.gen = t.gen
	t.objs[key] = st
	if uid := m.GetUID(); st.uid != "" && uid != "" && uid != st.uid {
		if err := deliver(tombstone(kind, key, st)); err != nil {
			return err
		}
		return deliver(watch.Event{Type: watch.Added, Object: ev.Object})
	}
	if st.rv == m.GetResourceVersion() {
		return nil
	}
	return deliver(watch.Event{Type: watch.Modified, Object: ev.Object})
}

// sweep delivers a Deleted event for every object the listing lacked.
func (t *tracker) sweep(kind objectKind, deliver func(watch.Event) error) error {
	for key, st := range t.objs {
		if st.gen == t.gen {
			continue
		}
		// The handler deletes key from the map; deleting during a range is
		// allowed.
		if err := deliver(tombstone(kind, key, st)); err != nil {
			return err
		}
	}
	return nil
}

// tombstone is the Deleted event for an object that vanished.
func tombstone(kind objectKind, key objKey, st objState) watch.Event {
	obj, m := kind.new()
	m.SetNamespace(key.namespace)
	m.SetName(key.name)
	m.SetUID(st.uid)
	m.SetResourceVersion(st.rv)
	return watch.Event{Type: watch.Deleted, Object: obj}
}

// know records the objects of WithResyncDiff's arguments as delivered.
func (rs *resyncState) know(known []runtime.Object) error {
	add := func(obj runtime.Object) error {
		s, ok := read(watch.Event{Type: watch.Added, Object: obj})
		if !ok {
			return badarg.New("k8s: WithResyncDiff", "known", reflect.TypeOf(obj), "is no list and has no object metadata")
		}
		rs.kind.observe(obj)
		rs.diff.record(s)
		return nil
	}
	for _, obj := range known {
		if obj == nil {
			continue
		}
		if meta.IsListType(obj) {
			if err := meta.EachListItem(obj, add); err != nil {
				return err
			}
			continue
		}
		if err := add(obj); err != nil {
			return err
		}
	}
	return nil
}
