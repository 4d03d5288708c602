// Package pgerr holds the error the packages of adapters/postgres
// (postgres, cdc, outbox) share.
package pgerr

import "github.com/resumable-go/resumable/stream"

// ErrInvalid is postgres.ErrInvalid and cdc.ErrInvalid (outbox's errors match it too): the error a
// constructor's failure for a bad argument or option matches. It matches
// stream.ErrInvalidOption too.
var ErrInvalid error = &invalid{}

type invalid struct{}

func (*invalid) Error() string { return "postgres: invalid argument" }

// Is makes the error match stream.ErrInvalidOption.
func (*invalid) Is(target error) bool { return target == stream.ErrInvalidOption }
