package etcd

import (
	"errors"
	"fmt"

	"github.com/resumable-go/resumable/stream"
)

// ErrNotOwner is matched by the error a fenced Save ([NewStore]) returns when its
// fence failed (the process no longer owns the stream: its lease expired or
// its owner key was deleted), and by the error [Guard] returns once the
// lease is known to be gone. Such errors are marked [errclass.Permanent]: a
// stream that meets one stops instead of retrying, since only the new owner
// may move the cursor.
var ErrNotOwner = errors.New("etcd: not the owner of the stream")

// ErrCursorChanged is matched by the error a Save ([NewStore]) returns when the
// cursor key was written by someone else since the Store last read or wrote
// it (an operator, or a second writer that holds no fence). The error is
// marked [errclass.Permanent]: continuing would overwrite that write.
var ErrCursorChanged = errors.New("etcd: the cursor key changed under the store")

// errClientClosed is the cause of the error a source returns once its
// client was closed.
var errClientClosed = errors.New("etcd: the client is closed")

// errAlreadyRunning is returned by [Group.Run] when another Run of the same
// Group is in progress.
var errAlreadyRunning = errors.New("etcd: Group.Run is already in progress")

// marked is an error that reads as err and matches both err and mark, a
// sentinel of the library (stream.ErrInvalidOption, cursor.ErrCorrupt)
// whose own message would not fit.
type marked struct {
	err  error
	mark error
}

func (e *marked) Error() string   { return e.err.Error() }
func (e *marked) Unwrap() []error { return []error{e.err, e.mark} }

// invalid returns the error of a bad argument or option: it reads as
// fmt.Errorf(format, a...) and matches [stream.ErrInvalidOption].
func invalid(format string, a ...any) error {
	return &marked{err: fmt.Errorf(format, a...), mark: stream.ErrInvalidOption}
}
