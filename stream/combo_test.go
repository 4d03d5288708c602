package stream_test

// The combination property test (issues 31 and 41): random scripts of
// source faults (drops, errors, server delays, expiry with or without a
// resync, ends of the stream, empty connections, heartbeats, Opens that
// block like a long poll, Recv panics), Store faults (failed, slow, failing
// for a streak of calls, panicking saves), open limiter waits, restart
// delays, the idle watchdog (firing while a batch lingers), transactions
// cut by a connection's end under WithBatchEnd, handler outcomes (ok,
// error, retryable, permanent, ErrStop, panic, slow) and ctx cancellations, over every combination of
// {Run, All} × n ∈ {1, 2, 4, 16} × order key × handler retry × dead letter ×
// checkpoint cadence {every event, every 10, interval} × resync hook, and
// RunBatch (batches of a random size and linger) × n ∈ {1, 4} × the same
// options.
//
// One scenario is a series of steps, each a Run (or an All loop) on the
// Resumer; a step that panicked stands for a crash, and the next step makes
// a new Resumer over the same Store, as does a random share of the others.
// Every step runs in a testing/synctest bubble, so time is fake: delays and
// slow calls cost nothing. After every step the invariants are checked:
//
//   - the committed cursor (OnCommit, Cursor, every Store.Save) never passes
//     an event whose handler has not returned nil (or that was not parked),
//     and never goes back;
//   - within a Run, events reach the handler in stream order (per key under
//     WithOrderKey, globally with one handler), and events of one key never
//     overlap;
//   - Stats agree with what the test observed, InFlight is 0 after Run, and
//     the Store holds the committed cursor unless the final save failed
//     or Run returned a Store's failure;
//   - a Run that returns nil ended at the end of the stream, with the cursor
//     where the Source ended it (or after a handler's ErrStop);
//   - every Open asks for the committed cursor or, under WithConcurrency
//     after a connection that ended cleanly, for the cursor of the last
//     event read while earlier ones still run; every completed resync's
//     cursor gets an OnCommit; hooks never overlap;
//   - no goroutine of the library is left once Run returned;
//   - no hot loop: at most comboMaxRetryOpens Opens at an unchanged cursor
//     in any fake second of a Run;
//   - a panic that reaches Run's caller is one the test injected (a
//     handler's, a Recv's, a Save's), with the Conn closed;
//   - under WithBatchEnd every batch ends at a transaction's end, at the
//     batch's max, or at the end of the log;
//   - no stall: a Run ends before the step's fake deadline.
//
// The faults are finite, so a scenario ends with a Run that returns nil at
// the end of the log; then every event must have been handled or parked.
// All with n > 1 must be refused with ErrInvalidOption and yield nothing else;
// so must RunBatch with n > 1 or a dead letter. Under RunBatch the handler
// takes each batch's events in order and fails the batch at an event's
// failure (an event's ErrStop lets it handle the rest, then stops); each
// batch must start right after the last one that returned nil (or repeat
// a failed one), and Stats().Events count the events of committed batches.
//
// By default every combination runs with one seed (comboSeed); run more
// with -combo.seeds=N (or RESUMABLE_COMBO_SEEDS=N) and replay one with
// -combo.seed=S; a failure names the seed and the combination:
//
//	go test ./stream -run 'TestCombinations/Run_n=4_key_retry_dl_every10_resync$' -combo.seed=S

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
	"github.com/resumable-go/resumable/stream/streamtest"
)

var (
	comboSeeds = flag.Int("combo.seeds", 0, "combination test: seeds per combination (default 1, or RESUMABLE_COMBO_SEEDS)")
	comboSeed  = flag.Uint64("combo.seed", 0, "combination test: the first seed (default 1), to replay a failure")
)

const (
	comboEvents        = 40               // log length, heartbeats included
	comboKeys          = 4                // distinct order keys
	comboMaxSteps      = 200              // Runs per scenario before it counts as stuck
	comboStepDeadline  = 10 * time.Minute // fake time; a Run still going then is stalled
	comboMaxRetryOpens = 12               // Opens at an unchanged cursor per fake second (backoff ≥ 100ms)
	comboMaxReports    = 8                // violations reported per combination
)

// errComboStall is the cause of a step's deadline.
var errComboStall = errors.New("combo: the step's fake deadline passed")

// combo is one combination of options.
type combo struct {
	all     bool
	batch   bool // RunBatch
	n       int
	key     bool
	retry   bool
	dl      bool
	cadence string // "every", "every10", "interval"
	resync  bool
}

func (c combo) String() string {
	var b strings.Builder
	switch {
	case c.all:
		b.WriteString("All")
	case c.batch:
		b.WriteString("Batch")
	default:
		b.WriteString("Run")
	}
	fmt.Fprintf(&b, "_n=%d", c.n)
	for _, f := range []struct {
		on   bool
		name string
	}{{c.key, "key"}, {c.retry, "retry"}, {c.dl, "dl"}} {
		if f.on {
			b.WriteString("_" + f.name)
		} else {
			b.WriteString("_no" + f.name)
		}
	}
	b.WriteString("_" + c.cadence)
	if c.resync {
		b.WriteString("_resync")
	} else {
		b.WriteString("_noresync")
	}
	return b.String()
}

// combos returns every combination.
func combos() []combo {
	var out []combo
	for _, mode := range []string{"Run", "All", "Batch"} {
		ns := []int{1, 2, 4, 16}
		if mode == "Batch" {
			ns = []int{1, 4}
		}
		all, batch := mode == "All", mode == "Batch"
		for _, n := range ns {
			for _, key := range []bool{false, true} {
				for _, retry := range []bool{false, true} {
					for _, dl := range []bool{false, true} {
						for _, cadence := range []string{"every", "every10", "interval"} {
							for _, resync := range []bool{false, true} {
								out = append(out, combo{all: all, batch: batch, n: n, key: key, retry: retry, dl: dl, cadence: cadence, resync: resync})
							}
						}
					}
				}
			}
		}
	}
	return out
}

// outcome is what one handler call does.
type outcome uint8

const (
	outOK outcome = iota
	outError
	outRetryable
	outPermanent
	outStop
	outPanic
	outSlow
)

var outcomeNames = [...]string{"ok", "error", "retryable", "permanent", "ErrStop", "panic", "slow"}

func (o outcome) String() string { return outcomeNames[o] }

// errComboHandler is the handlers' injected failure.
var errComboHandler = errors.New("combo: handler failure")

// errComboStore is the combination Store's failure.
var errComboStore = errors.New("combo: store unavailable")

// comboPanic is what a handler panics with.
type comboPanic struct{ seq int64 }

// scenario is one seed of one combination: the log, the faults, and what
// was observed, under mu (hooks, handlers and the Store are called from
// several goroutines).
type scenario struct {
	c    combo
	seed uint64

	log     []string            // "k0".."k3", or "beat"
	plans   map[int64][]outcome // per event, the outcomes of its first calls; ok after
	src     *streamtest.Source[string]
	store   *comboStore
	slowFor map[int64]time.Duration // slow outcomes' durations, per event
	resRand *rand.Rand              // the resync's choices

	mu          sync.Mutex
	calls       map[int64]int // handler calls per event, every life
	done        []bool        // per seq (index seq-1): handled with nil or ErrStop, or parked; heartbeats from the start
	donePrefix  int64         // every seq ≤ donePrefix is done
	violations  []string
	step        int
	r           *stream.Resumer[ev, int64] // the current life
	life        lifeObs
	run         runObs
	handlerRuns int
	steps       int
	trace       []string // what each step did, for the failure report
	hookBusy    atomic.Bool
	script      []streamtest.Step
	batchMax    int                   // WithBatch's max, under RunBatch
	linger      time.Duration         // WithBatch's linger
	txLen       int                   // under RunBatch, WithBatchEnd: a transaction ends at every txLen-th event (0: none)
	openDelay   map[int]time.Duration // Open calls (from 1) that block this long first: a long poll
	opensCalled int
	limiterWait time.Duration // each open limiter Wait (0: no limiter)
	minRestart  time.Duration
	idle        time.Duration  // WithIdleTimeout (0: off)
	recvPanics  map[int64]bool // events whose first Recv panics
	stallAt     map[int64]bool // under WithIdleTimeout, the Recv after these events stalls once (a silent connection)
}

// comboFired counts, over a whole TestCombinations, the injected faults of
// issue 41's alphabet that fired: each kind must fire somewhere.
var comboFired struct {
	openDelays, limiterWaits, recvPanics, savePanics, saveStreaks, txCuts, idleFires atomic.Int64
}

// comboRecvPanic is what a Conn's Recv panics with; comboSavePanic a Save.
type (
	comboRecvPanic struct{ seq int64 }
	comboSavePanic struct{ call int }
)

// comboLimiter makes every Open wait d first (honouring ctx).
type comboLimiter struct{ d time.Duration }

func (l comboLimiter) Wait(ctx context.Context) error {
	comboFired.limiterWaits.Add(1)
	select {
	case <-time.After(l.d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lifeObs is what the test observed during one Resumer's life.
type lifeObs struct {
	opens, connects, commitEvents, commitProgress, resyncs, replayed int
	saves, saveFails                                                 int
	parked                                                           []int64 // events parked (park returned nil)
	lastCommit                                                       int64
	commits                                                          map[int64]bool // cursors OnCommit reported
	resyncTos                                                        []int64        // cursors completed resyncs returned
}

// runObs is what the test observed during one Run.
type runObs struct {
	lastStart map[string]int64 // per order key (or "" when checked globally), the last event started
	inside    map[string]int   // per key, handler calls running
	opens     []comboOpen
	eosAt     int64 // the cursor at which a Conn reported the end of the stream; -1: none
	lastRecv  int64 // the cursor of the last event a Conn returned
	stopped   bool  // a handler returned ErrStop
	// Under RunBatch: where the next batch must start (the first event
	// after the last batch that returned nil, or the failed batch's first
	// event again), 0 until the Run's first batch.
	batchNext int64
}

type comboOpen struct {
	after int64
	at    time.Time
}

func (s *scenario) violate(format string, args ...any) {
	s.violations = append(s.violations, fmt.Sprintf("step %d: ", s.step)+fmt.Sprintf(format, args...))
}

// markDone records seq as handled or parked; s.mu is held.
func (s *scenario) markDone(seq int64) {
	s.done[seq-1] = true
	for s.donePrefix < int64(len(s.done)) && s.done[s.donePrefix] {
		s.donePrefix++
	}
}

// checkCommit checks a cursor about to be (or just) committed or saved;
// s.mu is held.
func (s *scenario) checkCommit(what string, c int64) {
	if c > s.donePrefix {
		s.violate("%s %d passes unfinished event %d (handler calls %d)", what, c, s.donePrefix+1, s.calls[s.donePrefix+1])
	}
}

// orderKey is the key under which order and overlap are checked, and
// whether they are checked at all.
func (s *scenario) orderKey(e ev) (string, bool) {
	switch {
	case s.c.n == 1:
		return "", true
	case s.c.key:
		return e.Value, true
	}
	return "", false
}

// start records a handler call of e and returns its outcome.
func (s *scenario) start(e ev) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlerRuns++
	k := s.calls[e.Seq]
	s.calls[e.Seq]++
	switch {
	case e.Seq < 1 || e.Seq > int64(len(s.log)) || e.Value != s.log[e.Seq-1]:
		s.violate("the handler got %+v, which is not in the log", e)
	case e.Value == "beat":
		s.violate("the heartbeat at %d reached the handler", e.Seq)
	}
	if key, ok := s.orderKey(e); ok {
		if last, seen := s.run.lastStart[key]; seen && e.Seq < last {
			s.violate("order: event %d (key %q) started after event %d in the same Run", e.Seq, key, last)
		}
		s.run.lastStart[key] = e.Seq
		if s.run.inside[key] > 0 {
			s.violate("overlap: event %d (key %q) started while %d of its key ran", e.Seq, key, s.run.inside[key])
		}
		s.run.inside[key]++
	}
	if p := s.plans[e.Seq]; k < len(p) {
		return p[k]
	}
	return outOK
}

// finish records the end of a handler call of e; ok: it returned nil or
// ErrStop.
func (s *scenario) finish(e ev, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if key, checked := s.orderKey(e); checked {
		s.run.inside[key]--
	}
	if ok && e.Seq >= 1 && e.Seq <= int64(len(s.log)) {
		s.markDone(e.Seq)
	}
}

// handle is the Run handler.
func (s *scenario) handle(_ context.Context, e ev) error {
	o := s.start(e)
	ok := false // a panic leaves it false
	defer func() { s.finish(e, ok) }()
	switch o {
	case outError:
		return fmt.Errorf("event %d: %w", e.Seq, errComboHandler)
	case outRetryable:
		return errclass.RetryAfter(fmt.Errorf("event %d: %w", e.Seq, errComboHandler), 50*time.Millisecond)
	case outPermanent:
		return errclass.Permanent(fmt.Errorf("event %d: %w", e.Seq, errComboHandler))
	case outStop:
		ok = true
		s.mu.Lock()
		s.run.stopped = true
		s.mu.Unlock()
		return stream.ErrStop
	case outPanic:
		panic(comboPanic{seq: e.Seq})
	case outSlow:
		time.Sleep(s.slowFor[e.Seq]) // fake time
	}
	ok = true
	return nil
}

// handleBatch is the RunBatch handler: each event's outcome in order; the
// first failure fails the batch (the events after it are not handled), a
// panic propagates, and an ErrStop lets the batch finish and then stops.
func (s *scenario) handleBatch(ctx context.Context, evs []ev) error {
	s.startBatch(evs)
	stop := false
	for _, e := range evs {
		switch err := s.handle(ctx, e); {
		case errors.Is(err, stream.ErrStop):
			stop = true
		case err != nil:
			s.endBatch(evs, false)
			return err
		}
	}
	s.endBatch(evs, true)
	if stop {
		return stream.ErrStop
	}
	return nil
}

// startBatch checks where a batch starts and that its events are in
// order; a retried batch may start again where it started.
func (s *scenario) startBatch(evs []ev) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(evs) == 0 || len(evs) > s.batchMax {
		s.violate("a batch of %d events, want 1 to %d", len(evs), s.batchMax)
		return
	}
	first := evs[0].Seq
	want := s.run.batchNext
	if want == 0 { // the Run's first batch: after the committed cursor
		want = s.nextEvent(s.r.Cursor())
	}
	if first != want {
		s.violate("a batch starts at %d, want %d", first, want)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			s.violate("a batch holds %d after %d", evs[i].Seq, evs[i-1].Seq)
		}
	}
	// Only the end of the stream hands over a part of a transaction: it came
	// after last, with nothing but heartbeats between.
	if last := evs[len(evs)-1].Seq; s.txLen > 0 && last%int64(s.txLen) != 0 && len(evs) < s.batchMax && s.nextEvent(last) <= int64(len(s.log)) &&
		!(s.run.eosAt >= last && s.nextEvent(last) > s.run.eosAt) {
		s.violate("a batch [%d..%d] ends inside a transaction of %d (max %d; the end of the stream reported at %d)", first, last, s.txLen, s.batchMax, s.run.eosAt)
	}
	s.run.lastStart[""] = first - 1 // a retried batch starts over
	s.run.batchNext = first
}

// endBatch notes where the next batch starts after evs returned ok or not.
func (s *scenario) endBatch(evs []ev, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.run.batchNext = s.nextEvent(evs[len(evs)-1].Seq)
	}
}

// nextEvent is the first event after seq that is not a heartbeat (the
// log's length + 1 if none).
func (s *scenario) nextEvent(seq int64) int64 {
	for seq++; seq <= int64(len(s.log)) && s.log[seq-1] == "beat"; seq++ {
	}
	return seq
}

// park is the dead letter.
func (s *scenario) park(_ context.Context, e ev, _ error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.life.parked = append(s.life.parked, e.Seq)
	s.markDone(e.Seq)
	return nil
}

// resyncFn replays the events after the committed cursor up to a random
// point and returns that point.
func (s *scenario) resyncFn(_ context.Context, _ error, emit func(ev) error) (int64, error) {
	s.mu.Lock()
	r := s.r
	s.mu.Unlock()
	from := r.Cursor()
	s.mu.Lock()
	to := min(int64(len(s.log)), from+1+int64(s.resRand.IntN(8)))
	s.mu.Unlock()
	for seq := from + 1; seq <= to; seq++ {
		if s.log[seq-1] == "beat" {
			continue
		}
		if err := emit(ev{Seq: seq, Value: s.log[seq-1]}); err != nil {
			return 0, err
		}
	}
	return to, nil
}

// comboSource counts the Opens of the scripted Source.
type comboSource struct{ s *scenario }

func (cs comboSource) Open(ctx context.Context, after int64) (stream.Conn[ev], error) {
	s := cs.s
	s.mu.Lock()
	r := s.r
	s.run.opens = append(s.run.opens, comboOpen{after: after, at: time.Now()})
	s.opensCalled++
	delay := s.openDelay[s.opensCalled]
	s.mu.Unlock()
	if delay > 0 { // a long poll: the server holds the request, then answers
		comboFired.openDelays.Add(1)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// concurrency.md: an Open asks for the committed cursor, or for the
	// last event read while the window still runs events before it.
	if c := r.Cursor(); c != after {
		s.mu.Lock()
		if s.c.n == 1 || after != s.run.lastRecv || c > after {
			s.violate("Open after %d while the committed cursor is %d and the last event read %d", after, c, s.run.lastRecv)
		}
		s.mu.Unlock()
	}
	c, err := s.src.Open(ctx, after)
	if err == nil {
		s.mu.Lock()
		s.life.opens++
		s.mu.Unlock()
	}
	if err != nil {
		return c, err
	}
	return &comboConn{Conn: c, s: s, last: after, closed: make(chan struct{})}, nil
}

// comboConn notes where its Source reported the end of the stream, and
// injects Recv panics and silences.
type comboConn struct {
	stream.Conn[ev]
	s      *scenario
	last   int64 // the last event's cursor (Recv is called from one goroutine at a time)
	closed chan struct{}
	once   sync.Once
}

func (c *comboConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *comboConn) Recv(ctx context.Context) (ev, error) {
	if c.s.takeStall(c.last) { // silent until the watchdog (or ctx) closes the connection
		select {
		case <-c.closed:
			return ev{}, errors.New("combo: connection closed while silent")
		case <-ctx.Done():
			return ev{}, ctx.Err()
		}
	}
	e, err := c.Conn.Recv(ctx)
	switch {
	case err == nil && c.s.takeRecvPanic(e.Seq):
		comboFired.recvPanics.Add(1)
		panic(comboRecvPanic{seq: e.Seq})
	case err == nil:
		c.last = e.Seq
		c.s.mu.Lock()
		c.s.run.lastRecv = e.Seq
		c.s.mu.Unlock()
	case errors.Is(err, stream.ErrEndOfStream):
		c.s.mu.Lock()
		c.s.run.eosAt = c.last
		c.s.mu.Unlock()
	}
	return e, err
}

// takeStall reports whether the Recv after the event at seq stalls, once.
func (s *scenario) takeStall(seq int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stallAt[seq] {
		delete(s.stallAt, seq)
		return true
	}
	return false
}

// takeRecvPanic reports whether the Recv of seq panics, once.
func (s *scenario) takeRecvPanic(seq int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recvPanics[seq] {
		delete(s.recvPanics, seq)
		return true
	}
	return false
}

// hook marks a hook running until the returned function is called, and
// reports hooks that overlap: the Hooks doc says they run on the Resumer's
// goroutine.
func (s *scenario) hook(name string) (leave func()) {
	if s.hookBusy.Swap(true) {
		s.mu.Lock()
		s.violate("%s called while another hook ran", name)
		s.mu.Unlock()
		return func() {}
	}
	return func() { s.hookBusy.Store(false) }
}

// comboStore is a memory Store whose Saves fail or are slow as scripted;
// it checks every cursor saved.
type comboStore struct {
	s     *scenario
	mu    sync.Mutex
	saved int64
	calls int
	fail  map[int]bool          // Save calls (from 1) that fail
	slow  map[int]time.Duration // Save calls that take this long (honouring ctx)
	panic map[int]bool          // Save calls that panic
	// streak: Save calls from streakFrom to streakTo fail, a Store down for
	// a while (the retry budget is unlimited here, so the stream survives).
	streakFrom, streakTo int
}

func (st *comboStore) Load(context.Context) (int64, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.saved, nil
}

func (st *comboStore) Save(ctx context.Context, c int64) error {
	st.mu.Lock()
	st.calls++
	k := st.calls
	st.mu.Unlock()
	s := st.s
	s.mu.Lock()
	s.checkCommit("Store.Save of cursor", c)
	s.mu.Unlock()
	if d := st.slow[k]; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			s.countSave(false)
			return ctx.Err()
		}
	}
	if st.panic[k] {
		comboFired.savePanics.Add(1)
		panic(comboSavePanic{call: k})
	}
	if st.fail[k] || (k >= st.streakFrom && k <= st.streakTo) {
		if k == st.streakFrom {
			comboFired.saveStreaks.Add(1)
		}
		s.countSave(false)
		return errComboStore
	}
	st.mu.Lock()
	if c < st.saved {
		s.mu.Lock()
		s.violate("Store.Save(%d) after Save(%d): the saved cursor went back", c, st.saved)
		s.mu.Unlock()
	}
	st.saved = c
	st.mu.Unlock()
	s.countSave(true)
	return nil
}

func (st *comboStore) value() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.saved
}

func (s *scenario) countSave(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ok {
		s.life.saves++
	} else {
		s.life.saveFails++
	}
}

// newScenario draws the log and the faults of one seed of c.
func newScenario(c combo, seed uint64) *scenario {
	h := fnv.New64a()
	h.Write([]byte(c.String()))
	rng := rand.New(rand.NewPCG(seed, h.Sum64())) // each combination its own faults
	s := &scenario{
		c: c, seed: seed,
		plans:   map[int64][]outcome{},
		slowFor: map[int64]time.Duration{},
		calls:   map[int64]int{},
		resRand: rand.New(rand.NewPCG(seed, 7)),
	}
	s.log = make([]string, comboEvents)
	s.done = make([]bool, comboEvents)
	for i := range s.log {
		if i > 0 && rng.IntN(10) == 0 {
			s.log[i] = "beat"
			s.done[i] = true
			continue
		}
		s.log[i] = "k" + strconv.Itoa(rng.IntN(comboKeys))
		seq := int64(i + 1)
		if rng.IntN(4) == 0 { // a quarter of the events misbehave at first
			for range 1 + rng.IntN(2) {
				o := outcome(1 + rng.IntN(6))
				s.plans[seq] = append(s.plans[seq], o)
				if o == outSlow {
					s.slowFor[seq] = time.Duration(200+rng.IntN(800)) * time.Millisecond
				}
				if o == outStop {
					break
				}
			}
		}
	}
	for s.donePrefix < int64(len(s.done)) && s.done[s.donePrefix] {
		s.donePrefix++
	}
	kinds := []streamtest.Kind{streamtest.FailOpen, streamtest.EndAfter, streamtest.BreakAfter,
		streamtest.DelayAfter, streamtest.ExpireAfter, streamtest.EndStreamAfter}
	script := streamtest.RandomScript(rng, 4+rng.IntN(12), 6, 3*time.Second, kinds...)
	s.src = streamtest.NewSource(s.log, script...)
	s.script = script
	s.store = &comboStore{s: s, fail: map[int]bool{}, slow: map[int]time.Duration{}}
	for range rng.IntN(4) {
		s.store.fail[1+rng.IntN(40)] = true
	}
	for range rng.IntN(4) {
		s.store.slow[1+rng.IntN(40)] = time.Duration(100+rng.IntN(1900)) * time.Millisecond
	}
	s.batchMax = []int{1, 3, 7, 100}[rng.IntN(4)]
	s.linger = []time.Duration{0, 20 * time.Millisecond, 3 * time.Second}[rng.IntN(3)]
	// Issue 41's alphabet: a connection's end under WithBatchEnd, long
	// polls, limiter waits, restart delays, the idle watchdog, Recv and
	// Save panics, a Store down for a streak of saves.
	if c.batch && !c.resync && rng.IntN(2) == 0 { // a resync's replay knows no transactions
		s.txLen = []int{4, 5, 8}[rng.IntN(3)]
	}
	s.openDelay = map[int]time.Duration{}
	for range rng.IntN(4) {
		s.openDelay[1+rng.IntN(20)] = time.Duration(100+rng.IntN(2900)) * time.Millisecond
	}
	if rng.IntN(3) == 0 {
		s.limiterWait = time.Duration(10+rng.IntN(300)) * time.Millisecond
	}
	if rng.IntN(3) == 0 {
		s.minRestart = time.Duration(50+rng.IntN(500)) * time.Millisecond
	}
	s.stallAt = map[int64]bool{}
	if rng.IntN(3) == 0 {
		s.idle = 2 * time.Second
		for range 1 + rng.IntN(2) {
			s.stallAt[1+int64(rng.IntN(comboEvents))] = true
		}
	}
	s.recvPanics = map[int64]bool{}
	if rng.IntN(4) == 0 {
		s.recvPanics[1+int64(rng.IntN(comboEvents))] = true
	}
	s.store.panic = map[int]bool{}
	if rng.IntN(4) == 0 {
		s.store.panic[1+rng.IntN(30)] = true
	}
	if rng.IntN(4) == 0 {
		s.store.streakFrom = 1 + rng.IntN(30)
		s.store.streakTo = s.store.streakFrom + 5 + rng.IntN(15)
	}
	return s
}

// newResumer makes the Resumer of a new life.
func (s *scenario) newResumer() (*stream.Resumer[ev, int64], error) {
	opts := []stream.Option{
		stream.WithBackoff(backoff.Exponential(backoff.WithInitialInterval(100*time.Millisecond),
			backoff.WithMaxInterval(2*time.Second), backoff.WithMultiplier(2), backoff.WithJitter(0))),
		stream.WithConcurrency(s.c.n),
		stream.WithHooks(stream.Hooks[int64]{
			OnConnect: func(stream.ConnectEvent[int64]) {
				defer s.hook("OnConnect")()
				s.mu.Lock()
				s.life.connects++
				s.mu.Unlock()
			},
			OnCommit: func(e stream.CommitEvent[int64]) {
				defer s.hook("OnCommit")()
				s.mu.Lock()
				defer s.mu.Unlock()
				s.life.commits[e.Cursor] = true
				s.checkCommit("OnCommit cursor", e.Cursor)
				if e.Cursor < s.life.lastCommit {
					s.violate("OnCommit(%d) after OnCommit(%d): the cursor went back", e.Cursor, s.life.lastCommit)
				}
				switch {
				case s.c.batch && !e.Resync: // one commit per batch: count its events and beats
					events, beats := 0, 0
					for seq := s.life.lastCommit + 1; seq <= e.Cursor; seq++ {
						if s.log[seq-1] == "beat" {
							beats++
						} else {
							events++
						}
					}
					if events != e.Handled || beats != e.Folded {
						s.violate("OnCommit(%d) of a batch: Handled %d, Folded %d; want %d and %d", e.Cursor, e.Handled, e.Folded, events, beats)
					}
					s.life.commitEvents += events
					s.life.commitProgress += beats
				case e.Progress:
					s.life.commitProgress++
				default:
					s.life.commitEvents++
				}
				s.life.lastCommit = e.Cursor
			},
			OnResync: func(e stream.ResyncEvent[int64]) {
				defer s.hook("OnResync")()
				s.mu.Lock()
				defer s.mu.Unlock()
				s.checkCommit("resync cursor", e.To)
				s.life.resyncTos = append(s.life.resyncTos, e.To)
				s.life.resyncs++
				s.life.replayed += e.Replayed
			},
			OnHandlerError: func(stream.HandlerEvent[int64]) { defer s.hook("OnHandlerError")() },
			OnDisconnect: func(e stream.DisconnectEvent[int64]) {
				defer s.hook("OnDisconnect")()
				if errors.Is(e.Err, stream.ErrIdleTimeout) {
					comboFired.idleFires.Add(1)
				}
				s.mu.Lock()
				defer s.mu.Unlock()
				if s.txLen > 0 && s.run.lastRecv%int64(s.txLen) != 0 && s.run.lastRecv > e.Cursor {
					comboFired.txCuts.Add(1) // the connection ended inside a transaction
				}
			},
		}),
	}
	if s.c.key {
		opts = append(opts, stream.WithOrderKey(func(e ev) string { return e.Value }))
	}
	if s.c.retry {
		opts = append(opts, stream.WithHandlerRetry(3, backoff.Constant(10*time.Millisecond)))
	}
	if s.c.dl {
		opts = append(opts, stream.WithDeadLetter(s.park))
	}
	switch s.c.cadence {
	case "every10":
		opts = append(opts, stream.WithCheckpointEvery(10))
	case "interval":
		opts = append(opts, stream.WithCheckpointInterval(time.Second))
	}
	if s.c.resync {
		opts = append(opts, stream.WithResync(s.resyncFn))
	}
	if s.c.batch {
		opts = append(opts, stream.WithBatch(s.batchMax, s.linger))
	}
	if s.txLen > 0 {
		opts = append(opts, stream.WithBatchEnd(func(e ev) bool { return e.Seq%int64(s.txLen) == 0 }))
	}
	if s.limiterWait > 0 {
		opts = append(opts, stream.WithOpenLimiter(comboLimiter{d: s.limiterWait}))
	}
	if s.minRestart > 0 {
		opts = append(opts, stream.WithMinRestartDelay(s.minRestart))
	}
	if s.idle > 0 {
		opts = append(opts, stream.WithIdleTimeout(s.idle))
	}
	r, err := stream.New[ev, int64](comboSource{s}, heartbeatExtract, s.store, opts...)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.r = r
	s.life = lifeObs{lastCommit: s.store.value(), commits: map[int64]bool{}}
	s.mu.Unlock()
	return r, nil
}

// runStep runs one Run (or All loop) and returns what it returned or
// panicked with.
func (s *scenario) runStep(ctx context.Context, r *stream.Resumer[ev, int64]) (panicked any, err error) {
	defer func() { panicked = recover() }()
	switch {
	case s.c.batch:
		return nil, r.RunBatch(ctx, s.handleBatch)
	case !s.c.all:
		return nil, r.Run(ctx, s.handle)
	}
	for e, yerr := range r.All(ctx) {
		if yerr != nil {
			return nil, yerr
		}
		o := s.start(e)
		switch o {
		case outOK, outSlow:
			if o == outSlow {
				time.Sleep(s.slowFor[e.Seq])
			}
			s.finish(e, true)
			continue
		case outPanic:
			s.finish(e, false)
			panic(comboPanic{seq: e.Seq})
		}
		s.finish(e, false) // an error or a stop: break, leaving the event uncommitted
		return nil, errBreakLoop
	}
	return nil, nil
}

// errBreakLoop marks an All step that broke out of its loop.
var errBreakLoop = errors.New("combo: broke out of the All loop")

// checkRefused checks that All refuses n > 1: one error matching
// ErrInvalidOption, nothing else.
func (s *scenario) checkRefused() {
	r, err := s.newResumer()
	if err != nil {
		s.violate("New() = %v", err)
		return
	}
	yields := 0
	for e, err := range r.All(context.Background()) {
		yields++
		if !errors.Is(err, stream.ErrInvalidOption) {
			s.violate("All with n=%d yielded (%v, %v), want an error matching ErrInvalidOption", s.c.n, e, err)
		}
	}
	if yields != 1 {
		s.violate("All with n=%d yielded %d times, want once", s.c.n, yields)
	}
	if got := s.calls; len(got) > 0 || s.src.Opens() != nil {
		s.violate("All with n=%d opened the Source or handled events", s.c.n)
	}
}

// checkBatchRefused checks that RunBatch refuses n > 1 and a dead letter:
// an error matching ErrInvalidOption, nothing opened or handled.
func (s *scenario) checkBatchRefused() {
	r, err := s.newResumer()
	if err != nil {
		s.violate("New() = %v", err)
		return
	}
	if err := r.RunBatch(context.Background(), s.handleBatch); !errors.Is(err, stream.ErrInvalidOption) {
		s.violate("RunBatch with n=%d, dead letter %v = %v, want an error matching ErrInvalidOption", s.c.n, s.c.dl, err)
	}
	if got := s.calls; len(got) > 0 || s.src.Opens() != nil {
		s.violate("RunBatch with n=%d, dead letter %v opened the Source or handled events", s.c.n, s.c.dl)
	}
}

// play runs the scenario's steps until the stream ended and every fault
// was spent.
func (s *scenario) play() {
	if s.c.all && s.c.n > 1 {
		s.steps = 1
		s.checkRefused()
		return
	}
	if s.c.batch && (s.c.n > 1 || s.c.dl) {
		s.steps = 1
		s.checkBatchRefused()
		return
	}
	rng := rand.New(rand.NewPCG(s.seed, 99))
	cancels := rng.IntN(4) // steps cancelled at a random fake moment
	r, err := s.newResumer()
	if err != nil {
		s.violate("New() = %v", err)
		return
	}
	for s.step = 1; s.step <= comboMaxSteps; s.step++ {
		s.steps = s.step
		s.mu.Lock()
		s.run = runObs{lastStart: map[string]int64{}, inside: map[string]int{}, eosAt: -1}
		s.mu.Unlock()
		ctx, stop := context.WithTimeoutCause(context.Background(), comboStepDeadline, errComboStall)
		if s.step <= cancels {
			cctx, cancel := context.WithCancel(ctx)
			t := time.AfterFunc(time.Duration(rng.IntN(3000))*time.Millisecond, cancel)
			panicked, err := s.runStep(cctx, r)
			t.Stop()
			cancel()
			s.afterStep(ctx, r, err, panicked)
			stop()
			if panicked != nil || rng.IntN(3) == 0 {
				if r, err = s.newResumer(); err != nil {
					s.violate("New() = %v", err)
					return
				}
			}
			continue
		}
		panicked, err := s.runStep(ctx, r)
		finished := s.afterStep(ctx, r, err, panicked) && err == nil && panicked == nil && r.Cursor() == int64(len(s.log))
		stop()
		if finished {
			s.checkEnd(r)
			return
		}
		if len(s.violations) >= comboMaxReports {
			return
		}
		if panicked != nil || rng.IntN(3) == 0 { // a crash, or a restart
			if r, err = s.newResumer(); err != nil {
				s.violate("New() = %v", err)
				return
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.violate("the stream did not finish in %d steps: cursor %d of %d, saved %d, first unfinished event %d",
		comboMaxSteps, s.r.Cursor(), len(s.log), s.store.value(), s.donePrefix+1)
}

// afterStep checks the invariants after a step; it reports whether the
// step ended on its own (not stalled).
func (s *scenario) afterStep(ctx context.Context, r *stream.Resumer[ev, int64], err error, panicked any) bool {
	synctest.Wait() // whatever the library left running has settled
	switch panicked.(type) {
	case nil, comboPanic, comboRecvPanic, comboSavePanic:
	default:
		s.mu.Lock()
		s.violate("Run panicked with %v, not a handler's panic", panicked)
		s.mu.Unlock()
	}
	if leaked := libraryGoroutines(); len(leaked) > 0 {
		s.mu.Lock()
		s.violate("%d goroutines of the library left after Run returned:\n%s", len(leaked), strings.Join(leaked, "\n"))
		s.mu.Unlock()
	}
	st := r.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	stalled := errors.Is(context.Cause(ctx), errComboStall)
	s.trace = append(s.trace, fmt.Sprintf("step %d: returned %v, panicked %v; cursor %d, saved %d, %d Opens, stats %+v",
		s.step, err, panicked, st.Cursor, s.store.value(), len(s.run.opens), st))
	if stalled {
		s.violate("Run still going after a fake %v (returned %v): stalled", comboStepDeadline, err)
	}
	if errors.Is(err, stream.ErrInvalidOption) {
		s.violate("Run() = %v", err)
	}
	l := s.life
	if st.Cursor != r.Cursor() {
		s.violate("Stats().Cursor = %d, Cursor() = %d", st.Cursor, r.Cursor())
	}
	s.checkCommit("Cursor()", st.Cursor)
	if st.InFlight != 0 {
		s.violate("Stats().InFlight = %d after Run returned", st.InFlight)
	}
	if int(st.Opens) != l.opens || l.connects != l.opens {
		s.violate("Stats().Opens = %d, OnConnect %d times, %d Opens succeeded", st.Opens, l.connects, l.opens)
	}
	// One OnCommit per completed resync may be the resync's cursor
	// (concurrency.md promises it), which counts in neither Events nor
	// Progress.
	if p := int(st.Progress); p > l.commitProgress || p < l.commitProgress-l.resyncs {
		s.violate("Stats().Progress = %d, OnCommit(progress) %d times, %d resyncs", st.Progress, l.commitProgress, l.resyncs)
	}
	if e := int(st.Events); e > l.commitEvents+l.replayed || e < l.commitEvents+l.replayed-l.resyncs {
		s.violate("Stats().Events = %d, want %d: OnCommit %d times + %d replayed by completed resyncs (%d)", st.Events, l.commitEvents+l.replayed, l.commitEvents, l.replayed, l.resyncs)
	}
	if int(st.Resyncs) != l.resyncs {
		s.violate("Stats().Resyncs = %d, OnResync %d times", st.Resyncs, l.resyncs)
	}
	if int(st.Saves) != l.saves || int(st.SaveErrors) > l.saveFails {
		s.violate("Stats() Saves = %d, SaveErrors = %d; the Store saw %d Saves succeed and %d fail", st.Saves, st.SaveErrors, l.saves, l.saveFails)
	}
	committedParks := 0
	for _, seq := range l.parked {
		if seq <= st.Cursor {
			committedParks++
		}
	}
	if int(st.Parked) > committedParks {
		s.violate("Stats().Parked = %d, but %d of the %d events parked (%v) are committed (cursor %d)", st.Parked, committedParks, len(l.parked), l.parked, st.Cursor)
	}
	if !s.c.retry && st.HandlerRetries != 0 {
		s.violate("Stats().HandlerRetries = %d without WithHandlerRetry", st.HandlerRetries)
	}
	if st.Skipped != 0 {
		s.violate("Stats().Skipped = %d without WithSkipRepeats", st.Skipped)
	}
	// A Run that returns because saving failed makes no final save: its
	// error says the Store lags.
	if panicked == nil && st.FinalSaveError == nil && !errors.Is(err, errComboStore) && s.store.value() != st.Cursor {
		s.violate("the Store holds %d after Run returned %v, want the committed %d (no final save error)", s.store.value(), err, st.Cursor)
	}
	if err == nil && panicked == nil && !stalled && !s.run.stopped {
		switch {
		case s.run.eosAt < 0:
			s.violate("Run returned nil, but no Conn reported the end of the stream and no handler ErrStop")
		case st.Cursor != s.run.eosAt:
			s.violate("Run returned nil at the end of the stream at %d, with the committed cursor at %d", s.run.eosAt, st.Cursor)
		}
	}
	for _, to := range l.resyncTos {
		if !l.commits[to] {
			s.violate("no OnCommit for the cursor %d a resync returned", to)
		}
	}
	s.checkOpens()
	return !stalled
}

// checkOpens checks that a Run did not reopen at an unchanged cursor more
// than comboMaxRetryOpens times in any fake second.
func (s *scenario) checkOpens() {
	var same []time.Time
	for i := 1; i < len(s.run.opens); i++ {
		if s.run.opens[i].after == s.run.opens[i-1].after {
			same = append(same, s.run.opens[i].at)
		}
	}
	for i := range same {
		j := i
		for j < len(same) && same[j].Sub(same[i]) < time.Second {
			j++
		}
		if j-i > comboMaxRetryOpens {
			s.violate("hot loop: %d Opens at an unchanged cursor within a fake second (from %v)", j-i, same[i].Format(time.StampMilli))
			return
		}
	}
}

// checkEnd checks the end of a scenario: every event handled or parked.
func (s *scenario) checkEnd(r *stream.Resumer[ev, int64]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, d := range s.done {
		if !d {
			s.violate("the stream ended (cursor %d) but event %d was never handled nor parked (%d calls)", r.Cursor(), i+1, s.calls[int64(i+1)])
			break
		}
	}
	if got := s.store.value(); got != int64(len(s.log)) {
		s.violate("the Store holds %d at the end, want %d", got, len(s.log))
	}
}

// libraryGoroutines returns the stacks of goroutines running code of
// package stream (the library, not its tests).
func libraryGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	self, _, _ := strings.Cut(string(buf), "[") // "goroutine N ": the caller, listed first
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.HasPrefix(g, self) && strings.Contains(g, "resumable-go/resumable/stream.(") {
			out = append(out, g)
		}
	}
	return out
}

// comboSeedList returns the seeds to run per combination.
func comboSeedList() []uint64 {
	n := *comboSeeds
	if n == 0 {
		if env, err := strconv.Atoi(os.Getenv("RESUMABLE_COMBO_SEEDS")); err == nil && env > 0 {
			n = env
		} else {
			n = 1
		}
	}
	first := *comboSeed
	if first == 0 {
		first = 1
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	return seeds
}

func TestCombinations(t *testing.T) {
	seeds := comboSeedList()
	var total struct {
		combos, scenarios, steps, handlerCalls, failed int
	}
	for _, c := range combos() {
		t.Run(c.String(), func(t *testing.T) {
			total.combos++
			for _, seed := range seeds {
				var s *scenario
				synctest.Test(t, func(t *testing.T) {
					s = newScenario(c, seed)
					s.play()
				})
				total.scenarios++
				total.steps += s.steps
				total.handlerCalls += s.handlerRuns
				if len(s.violations) > 0 {
					total.failed++
					v := s.violations[:min(len(s.violations), comboMaxReports)]
					t.Errorf("seed %d, %s (replay: -run 'TestCombinations/%s$' -combo.seed=%d), %d violations:\n%s",
						seed, c, c, seed, len(s.violations), strings.Join(v, "\n"))
					if testing.Verbose() {
						t.Logf("seed %d, %s: log %v\nplans %v\nscript %v\n%s", seed, c, s.log, s.plans, s.script, strings.Join(s.trace, "\n"))
					}
				}
			}
		})
	}
	t.Logf("%d combinations × %d seeds: %d scenarios, %d steps (Runs and All loops), %d handler calls; %d scenarios failed",
		total.combos, len(seeds), total.scenarios, total.steps, total.handlerCalls, total.failed)
	f := &comboFired
	t.Logf("faults fired: %d long-poll Opens, %d limiter waits, %d Recv panics, %d Save panics, %d Store outages, %d transactions cut by a connection's end, %d idle closes",
		f.openDelays.Load(), f.limiterWaits.Load(), f.recvPanics.Load(), f.savePanics.Load(), f.saveStreaks.Load(), f.txCuts.Load(), f.idleFires.Load())
	if t.Failed() || len(combos()) != total.combos {
		return // a partial run (-run) need not fire every kind
	}
	for name, n := range map[string]int64{"long-poll Open": f.openDelays.Load(), "limiter wait": f.limiterWaits.Load(),
		"Recv panic": f.recvPanics.Load(), "Save panic": f.savePanics.Load(), "Store outage": f.saveStreaks.Load(),
		"transaction cut": f.txCuts.Load(), "idle close": f.idleFires.Load()} {
		if n == 0 {
			t.Errorf("no %s fired: the alphabet no longer exercises it", name)
		}
	}
}
