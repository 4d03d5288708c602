package k8s

import (
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/resumable-go/resumable/errclass"
)

// StatusClassifier returns the [errclass.Classifier] with client-go's
// RetryWatcher's rules for the failures of a [WatchSource] watch, for a
// [stream.Resumer] of your own that wants them rather than the marks
// WatchSource puts on its errors (which [errclass.Default] reads, and a
// [RetryWatcher] follows). Asked first, it differs from the marks in one
// case: a 410 at open is retried, as client-go does. With resync, 410
// Gone and Expired, in the stream or at open, are [errclass.Expired], so
// that the stream resyncs.
//
// A watch.Error event in the stream: code 410 is [errclass.Fail]; any other
// Status is [errclass.Retry] after its Details.RetryAfterSeconds; an object
// that is no Status is [errclass.Retry]. A failure to open: Forbidden and
// Unauthorized are [errclass.Fail]; 410 is [errclass.Retry] (the same
// resource version, forever after a server restart); anything else
// (EOF, timeouts, connection errors) is [errclass.Unknown], retried by
// [errclass.Default]. It is safe for concurrent use.
func StatusClassifier(resync bool) errclass.Classifier { return statusClassifier{resync: resync} }

type statusClassifier struct{ resync bool }

func (c statusClassifier) Classify(err error) errclass.Decision {
	var ee *eventError
	if errors.As(err, &ee) {
		st, ok := ee.status()
		if !ok {
			return errclass.Decision{Action: errclass.Retry}
		}
		if st.Code == http.StatusGone {
			if c.resync {
				return errclass.Decision{Action: errclass.Expired}
			}
			return errclass.Decision{Action: errclass.Fail}
		}
		var after time.Duration
		if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
			after = time.Duration(st.Details.RetryAfterSeconds) * time.Second
		}
		return errclass.Decision{Action: errclass.Retry, After: after}
	}
	switch {
	case utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err):
		// Checked first, as client-go does.
		return errclass.Decision{}
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return errclass.Decision{Action: errclass.Fail}
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		if c.resync {
			return errclass.Decision{Action: errclass.Expired}
		}
		return errclass.Decision{Action: errclass.Retry}
	}
	return errclass.Decision{}
}
