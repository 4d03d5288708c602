package k8s

import (
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/resumable-go/resumable/errclass"
)

// StatusClassifier returns the [errclass.Classifier] for the failures of a
// watch made with [WatchSource], with the rules of client-go's
// RetryWatcher: exactly those rules when resync is false; with resync (for
// a stream with a resync hook), 410 Gone and Expired, in the stream or at
// open, are [errclass.Expired], so that the stream resyncs.
//
// A failure reported in the stream (a watch.Error event, which [WatchSource]
// returns as an error that unwraps to apierrors.FromObject of its object):
//   - whose object is not a metav1.Status: [errclass.Retry];
//   - with code 410 Gone: [errclass.Fail] (client-go forwards the event and
//     stops), or [errclass.Expired] with resync;
//   - with any other code (500 and 504 included): [errclass.Retry], after
//     the Status's Details.RetryAfterSeconds.
//
// A failure to open the watch (any other error):
//   - Forbidden or Unauthorized: [errclass.Fail];
//   - 410 Gone or Expired: [errclass.Retry] (client-go reopens the same
//     resource version, which fails again until the server forgets it was
//     gone — or forever, after a server restart), or [errclass.Expired]
//     with resync;
//   - anything else (io.EOF, unexpected EOF, timeouts, connection errors):
//     [errclass.Unknown], which a stream resolves with [errclass.Default]:
//     retried, unless the error carries an errclass marker.
//
// It is safe for concurrent use.
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
