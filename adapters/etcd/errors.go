package etcd

import (
	"errors"

	"github.com/resumable-go/resumable/cursor"
)

// ErrNotOwner is matched by the error of a fenced Save ([NewStore]) whose
// fence failed, and of [Guard] once the lease may be gone: the process no
// longer owns the stream. Such errors are [errclass.Permanent]: only the
// new owner may move the cursor.
var ErrNotOwner = errors.New("etcd: not the owner of the stream")

// ErrCursorChanged is matched by the error of a Save ([NewStore]) that found
// the cursor key written by someone else since the Store last read or
// wrote it. It is [errclass.Permanent]: going on would overwrite that write.
var ErrCursorChanged = errors.New("etcd: the cursor key changed under the store")

// errClientClosed: the source's client was closed.
var errClientClosed = errors.New("etcd: the client is closed")

var errAlreadyRunning = errors.New("etcd: Group.Run is already in progress")

// corrupt reads as err and matches cursor.ErrCorrupt too, whose own
// message ("corrupt cursor file") would not fit a key.
type corrupt struct{ err error }

func (e *corrupt) Error() string   { return e.err.Error() }
func (e *corrupt) Unwrap() []error { return []error{e.err, cursor.ErrCorrupt} }
