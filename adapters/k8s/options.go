package k8s

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/stream"
)

// defaultMinRestartDelay is the least time between the starts of two
// consecutive watches of a [RetryWatcher] unless [WithMinRestartDelay] says
// otherwise: one second, as in client-go.
const defaultMinRestartDelay = time.Second

// Option configures a [RetryWatcher]. Options are made by the With functions
// of this package; a nil Option is ignored.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	minRestart time.Duration
	logger     *zap.Logger
	policy     backoff.Policy
	classifier errclass.Classifier
	resync     ResyncFunc
	diff       bool
	known      []runtime.Object // WithResyncDiff's arguments
	idle       time.Duration
	limiter    stream.Limiter
	hooks      []stream.Hooks[string]
}

func newConfig(opts []Option) config {
	c := config{minRestart: defaultMinRestartDelay}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.logger == nil {
		c.logger = nopLogger
	}
	if c.policy == nil {
		c.policy = nonePolicy
	}
	return c
}

// Shared defaults: a watcher should cost as little as client-go's when idle.
var (
	nopLogger  = zap.NewNop()
	nonePolicy = backoff.Constant(0)
)

// WithMinRestartDelay sets the least time between the starts of two
// consecutive watches ([stream.WithMinRestartDelay]). Default one second,
// as in client-go; 0 turns it off; a negative d makes the constructor fail.
func WithMinRestartDelay(d time.Duration) Option {
	return optionFunc(func(c *config) { c.minRestart = d })
}

// WithLogger sets the logger. Reopened watches are logged at Debug, retried
// failures at Info, the failure that stops the watcher at Warn; nothing per
// event above Debug. Nil means zap.NewNop(), which is also the default.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithBackoff sets the policy for the delay after a failed watch (the delay
// rule: docs/how-it-decides.md). A policy that gives up stops the watcher
// after a final watch.Error event describing the last failure. Default:
// backoff.Constant(0), as in client-go. Nil means the default.
func WithBackoff(p backoff.Policy) Option {
	return optionFunc(func(c *config) { c.policy = p })
}

// WithClassifier sets a classifier consulted for every failure before the
// Kubernetes rules of [StatusClassifier]: its decisions other than
// [errclass.Unknown] win. Use it to stop on errors client-go retries, or to
// retry ones it stops on (a Forbidden while RBAC is being set up, say). A
// failure it classifies [errclass.Fail] stops the watcher after a final
// watch.Error event. Nil means none, which is the default.
func WithClassifier(c errclass.Classifier) Option {
	return optionFunc(func(cfg *config) { cfg.classifier = c })
}

// WithResync makes the watcher survive an expired resource version, which
// client-go's RetryWatcher cannot: when a watch is refused with 410 Gone or
// Expired (at open or in the stream), f is called, its replay is delivered
// between two marker Bookmarks (see [IsResyncMarker]), and watching
// continues from the resource version it returned, after the usual delay
// (two watches start at least the minimum restart delay apart, resync or
// not). A failing f is classified like any other failure (retried by
// default, from a new start marker). [WatchListResync] and [ListResync]
// make an f from a ListerWatcher. Nil means no resync, which is the
// default: the watcher then behaves exactly as client-go's.
func WithResync(f ResyncFunc) Option {
	return optionFunc(func(c *config) { c.resync = f })
}

// WithResyncDiff makes a resync deliver only what changed while the watch
// was expired, instead of the whole state. The watcher remembers the key
// (namespace and name), UID and resource version of every object it
// delivered and did not see deleted; a resync then compares its listing
// with them and delivers, between the same two markers:
//   - Added for an object never delivered;
//   - Modified for one whose resource version changed;
//   - Deleted for one the listing lacks: its object is of the watched type
//     and has the namespace, name, UID and resource version last delivered
//     (and the group, version and kind, when the watched objects have one),
//     nothing else;
//   - Deleted then Added for one recreated under the same name (another
//     UID);
//   - nothing for one unchanged.
//
// known are the objects the consumer has from elsewhere, usually the list
// whose resource version the watch starts from: lists (their items count)
// or single objects, remembered as if delivered. Without them an object
// from that list that is deleted while the watch is expired gets no
// Deleted event, and one that is unchanged comes again as Added. The
// constructor fails on one that is no list and has no object metadata.
//
// A consumer applies these events as it applies any event. It costs memory
// for every object remembered (about 190 bytes with short names; see
// docs/kubernetes.md) and, per event, a map update. It needs [WithResync]:
// without it the constructor fails.
func WithResyncDiff(known ...runtime.Object) Option {
	return optionFunc(func(c *config) {
		c.diff = true
		c.known = append(c.known, known...)
	})
}

// WithIdleTimeout closes and reopens a watch that delivered nothing for d,
// bookmarks included: it catches a connection that died without the
// watcher noticing (a peer that vanished without a FIN, a NAT that dropped
// the flow), on which client-go's RetryWatcher waits until the server's
// watch timeout, which never comes. The reopen is a retried failure (see
// [stream.WithIdleTimeout]). An API server sends a bookmark to a quiet
// watch that allows them about once a minute, so d should be well above
// that: a few minutes. Default 0, off; a negative d makes the constructor
// fail.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.idle = d })
}

// WithOpenLimiter makes every watch the watcher opens, the first included,
// wait on l (after the restart delay). Share one l, a *rate.Limiter from
// golang.org/x/time/rate say, between many watchers so that they do not
// stampede an API server that just came back, as every client-go
// RetryWatcher does a second after it went away. A watcher blocked on l
// stops promptly. Nil means none, which is the default.
func WithOpenLimiter(l stream.Limiter) Option {
	return optionFunc(func(c *config) { c.limiter = l })
}

// WithHooks installs callbacks on the watcher's Resumer, as
// [stream.WithHooks] does: they are told of every watch opened, ended and
// reopened with its delay, every resource version committed (when the
// consumer received the event, or a bookmark) and every resync, on the
// watcher's goroutine; a cursor here is a resource version. Several add up.
// This is how a metrics collector (metrics/prom) follows a RetryWatcher.
//
// OnResync reports each completed resync (only ever with [WithResync]),
// after the replay was delivered and before watching resumes: its Cause is
// the failure that showed the resource version had expired (a 410 in the
// stream or at the watch call), From the expired resource version, To the
// one the resync returned, and Replayed how many events of the replay were
// delivered, the markers not counted (with [WithResyncDiff], the
// differences only). It runs concurrently with the consumer, which may
// still be handling the end marker: to know where in the stream a resync
// happened, watch for the markers ([IsResyncMarker]) instead.
func WithHooks(h stream.Hooks[string]) Option {
	return optionFunc(func(c *config) { c.hooks = append(c.hooks, h) })
}
