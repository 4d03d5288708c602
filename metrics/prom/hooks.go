package prom

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// Hooks attaches one stream to c under name and returns the hooks that count
// it, for [stream.WithHooks] or an adapter's option that takes stream.Hooks,
// and the function to call once the stream is done. C is the stream's cursor
// type. Use one call of Hooks per stream: streams sharing one set of hooks
// would confuse the connected gauge.
//
// Detach stops the stream counting as attached and connected, keeps its
// counts in the name's counters, and drops the name's series when no other
// stream of that name is attached; hooks called after it count nothing.
// Detach may be called more than once, from any goroutine. Invalid UTF-8 in
// name is replaced by U+FFFD. A nil c gives empty hooks and a no-op detach.
func Hooks[C any](c *Collector, name string) (hooks stream.Hooks[C], detach func()) {
	if c == nil {
		return stream.Hooks[C]{}, func() {}
	}
	m := c.attach(labelValue(name))
	return stream.Hooks[C]{
		OnConnect: func(stream.ConnectEvent[C]) {
			m.opens.Add(1)
			m.state.CompareAndSwap(idle, connected)
		},
		OnDisconnect: func(e stream.DisconnectEvent[C]) {
			m.state.CompareAndSwap(connected, idle)
			switch {
			case e.Clean:
				m.cleanEnds.Add(1)
			case e.Decision.Action == errclass.Fail:
				m.failed.Add(1)
			case e.Decision.Action == errclass.Expired:
				m.expired.Add(1)
			default:
				m.retried.Add(1)
			}
		},
		OnRetry: func(e stream.RetryEvent[C]) {
			if m.state.Load() != detached {
				m.delay.Observe(e.Delay.Seconds())
			}
		},
		OnCommit: func(e stream.CommitEvent[C]) {
			switch {
			case e.Resync: // counted by OnResync
			case e.Handled+e.Folded > 0: // a batch (RunBatch): each of its events counts
				m.events.Add(uint64(e.Handled))
				m.progress.Add(uint64(e.Folded))
			case e.Progress:
				m.progress.Add(1)
			default:
				m.events.Add(1)
			}
			if e.Parked {
				m.parked.Add(1)
			}
			m.inFlight.Store(int64(e.InFlight))
		},
		OnHandlerError: func(e stream.HandlerEvent[C]) {
			if e.Retry {
				m.handlerRetries.Add(1)
			}
		},
		OnSave: func(e stream.SaveEvent[C]) {
			if e.Err != nil {
				m.saveErrors.Add(1)
			} else {
				m.saves.Add(1)
			}
		},
		OnStop: func(stream.StopEvent[C]) {
			m.state.CompareAndSwap(connected, idle)
			m.inFlight.Store(0)
		},
		OnResync: func(e stream.ResyncEvent[C]) {
			m.resyncs.Add(1)
			m.events.Add(uint64(e.Replayed))
		},
	}, func() { c.detach(m) }
}

// The states of a member.
const (
	idle int32 = iota
	connected
	detached
)

// member is one stream attached to a group: the counters its hooks write,
// which only scrapes and detach read.
type member struct {
	events, progress, opens, cleanEnds atomic.Uint64
	resyncs, saves, saveErrors         atomic.Uint64
	retried, failed, expired           atomic.Uint64
	handlerRetries, parked             atomic.Uint64
	inFlight                           atomic.Int64 // as of the last commit
	state                              atomic.Int32 // idle, connected or detached

	name  string
	g     *group
	delay prometheus.Observer
}

// load returns a snapshot of m's counters.
func (m *member) load() totals {
	return totals{
		events:     m.events.Load(),
		progress:   m.progress.Load(),
		opens:      m.opens.Load(),
		cleanEnds:  m.cleanEnds.Load(),
		resyncs:    m.resyncs.Load(),
		saves:      m.saves.Load(),
		saveErrors: m.saveErrors.Load(),
		retried:    m.retried.Load(),
		failed:     m.failed.Load(),
		expired:    m.expired.Load(),
		retries:    m.handlerRetries.Load(),
		parked:     m.parked.Load(),
	}
}
