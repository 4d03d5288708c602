package postgres

import (
	"errors"

	"github.com/resumable-go/resumable/adapters/postgres/internal/pgerr"
)

// ErrCursorChanged is matched by the error [Store.Save] and a
// [Transactional] handler return when the cursor row was written by someone
// else since the Store last read or wrote it: another process running the
// same stream (a deploy overlap, a paused process that woke up), or an
// operator. The error is marked [errclass.Permanent], so a stream stops: the
// transaction that met it was rolled back, and going on would overwrite the
// other writer's cursor.
var ErrCursorChanged = errors.New("postgres: the cursor row changed under the store")

// ErrInvalid is matched by the error the constructors return for a bad
// argument or option (of package outbox too). It is the same error as
// cdc.ErrInvalid, and matches stream.ErrInvalidOption.
var ErrInvalid = pgerr.ErrInvalid
