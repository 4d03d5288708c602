package cdc

import "github.com/resumable-go/resumable/adapters/postgres/internal/pgerr"

// ErrInvalid is matched by the error [NewSource] and [NewResumer] return for
// a bad argument or option. It is the same error as postgres.ErrInvalid,
// and matches stream.ErrInvalidOption.
var ErrInvalid = pgerr.ErrInvalid
