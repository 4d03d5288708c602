package k8s

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/resumable-go/resumable/backoff"
	"github.com/resumable-go/resumable/errclass"
	"github.com/resumable-go/resumable/internal/badarg"
	"github.com/resumable-go/resumable/stream"
)

// defaultMinRestartDelay is client-go's: one second.
const defaultMinRestartDelay = time.Second

// Option configures a [RetryWatcher]. Options are made by the With functions
// of this package; a nil Option is ignored. Seven of them set the
// watcher's [stream.Resumer] through the stream option of the same name
// (each says which, and where its default differs from stream's: the
// defaults are client-go's); a Resumer of your own over [WatchSource]
// takes the stream options themselves.
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
	errs       []error // the options' bad arguments
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

// Shared, so that an idle watcher costs as little as client-go's.
var (
	nopLogger  = zap.NewNop()
	nonePolicy = backoff.Constant(0)
)

// WithMinRestartDelay sets the least time between the starts of two
// consecutive watches: [stream.WithMinRestartDelay]. Default one second,
// client-go's (stream's default is 0); 0 turns it off; a negative d makes
// the constructor fail.
func WithMinRestartDelay(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, badarg.New("k8s: WithMinRestartDelay", "d", d, "must not be negative"))
			return
		}
		c.minRestart = d
	})
}

// WithLogger sets the logger, [stream.WithLogger]: reopens at Debug,
// retried failures at Info, the failure that stops the watcher at Warn.
// Nil means zap.NewNop(), the default.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) { c.logger = l })
}

// WithBackoff sets the delay policy after a failed watch:
// [stream.WithBackoff]. A policy that gives up stops the watcher after a
// final watch.Error event. Nil means backoff.Constant(0), the default:
// client-go's RetryWatcher does not back off, and the one-second
// [WithMinRestartDelay] alone spaces its watches (stream's default,
// backoff.Default, is exponential).
func WithBackoff(p backoff.Policy) Option {
	return optionFunc(func(c *config) { c.policy = p })
}

// WithClassifier sets a classifier asked first, [stream.WithClassifier]:
// its decisions other than [errclass.Unknown] win over the marks the watch
// puts on its errors (see [WatchSource]; to retry a Forbidden while RBAC is
// being set up, say). [errclass.Fail] stops the watcher after a final
// watch.Error event. Nil means none, the default: [errclass.Default]
// reads the marks.
func WithClassifier(c errclass.Classifier) Option {
	return optionFunc(func(cfg *config) { cfg.classifier = c })
}

// WithResync makes the watcher survive an expired resource version: on 410
// Gone or Expired (at open or in the stream), f is called, its replay is
// delivered between two marker Bookmarks (see [IsResyncMarker]), and the
// watch continues from the resource version f returned, after the usual
// restart delay. A failing f is retried by default, from a new start
// marker. [WatchListResync] and [ListResync] make an f. Nil means no
// resync, the default: then a 410 behaves as in client-go. It is
// [stream.WithResync] with the markers added, for a [ResyncFunc], which
// differs from [stream.ResyncFunc]: it gets the expired resource version,
// not the error, and emits watch events.
func WithResync(f ResyncFunc) Option {
	return optionFunc(func(c *config) { c.resync = f })
}

// WithResyncDiff makes a resync deliver only what changed while the watch
// was expired, between the same two markers: Added, Modified, Deleted for
// an object the listing lacks (an object of the watched type carrying only
// namespace, name, UID and the last resource version delivered), Deleted
// then Added for one recreated under another UID, nothing for one
// unchanged. The watcher remembers the key, UID and resource version of
// every object delivered and not deleted (about 190 bytes each).
//
// known are objects the consumer has from elsewhere, usually the list the
// watch starts from (lists or single objects), remembered as if delivered;
// without them a listed object deleted during the gap gets no Deleted
// event. The constructor fails without [WithResync], or on a known object
// that is no list and has no object metadata.
func WithResyncDiff(known ...runtime.Object) Option {
	return optionFunc(func(c *config) {
		c.diff = true
		c.known = append(c.known, known...)
	})
}

// WithIdleTimeout reopens, as a retried failure, a watch that delivered
// nothing for d, bookmarks included: a connection that died unnoticed
// ([stream.WithIdleTimeout]). API servers send a quiet watch a bookmark
// about once a minute, so choose a few minutes. Default 0, off, as
// stream's; a negative d makes the constructor fail.
func WithIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, badarg.New("k8s: WithIdleTimeout", "d", d, "must not be negative"))
			return
		}
		c.idle = d
	})
}

// WithOpenLimiter makes every watch open, the first included, wait on l
// after the restart delay ([stream.WithOpenLimiter]). Share one l (a
// *rate.Limiter, say) between many
// watchers so that they do not stampede an API server that just came back.
// A watcher blocked on l stops promptly. Nil means none, the default.
func WithOpenLimiter(l stream.Limiter) Option {
	return optionFunc(func(c *config) { c.limiter = l })
}

// WithHooks installs callbacks on the watcher's Resumer, as
// [stream.WithHooks] does, called on the watcher's goroutine; a cursor is a
// resource version. Several add up (metrics/prom uses them).
//
// OnResync reports each completed resync: Cause is the 410 itself, From
// the expired resource version, To the one the resync returned, Replayed
// the events delivered without the markers. It runs concurrently with the
// consumer: to know where in the stream a resync happened, watch for the
// markers ([IsResyncMarker]).
func WithHooks(h stream.Hooks[string]) Option {
	return optionFunc(func(c *config) { c.hooks = append(c.hooks, h) })
}
