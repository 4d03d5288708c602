package etcd

import "errors"

// ErrNotOwner is matched by the error a fenced [Store.Save] returns when its
// fence failed (the process no longer owns the stream: its lease expired or
// its election key was deleted), and by the error [Owner.Check] and
// [Guard] return once the lease is known to be gone. Such errors are
// marked [errclass.Permanent]: a stream that meets one stops instead of
// retrying, since only the new owner may move the cursor.
var ErrNotOwner = errors.New("etcd: not the owner of the stream")

// ErrCursorChanged is matched by the error [Store.Save] returns when the
// cursor key was written by someone else since the Store last read or wrote
// it (an operator, or a second writer that holds no fence). The error is
// marked [errclass.Permanent]: continuing would overwrite that write.
var ErrCursorChanged = errors.New("etcd: the cursor key changed under the store")

// ErrCorrupt is matched by the error [Store.Load] returns when the cursor
// key holds a value the Store's codec cannot decode. The error is marked
// [errclass.Permanent]: an operator has to repair the key, or delete it to
// start over from the initial cursor.
var ErrCorrupt = errors.New("etcd: the cursor key holds no cursor")

// ErrClientClosed is matched by the error a [Source] returns once its
// client was closed. The error is marked [errclass.Permanent].
var ErrClientClosed = errors.New("etcd: the client is closed")

// ErrInvalid is matched by the error the constructors and [Group.Run]
// return for a bad argument or option.
var ErrInvalid = errors.New("etcd: invalid argument")
